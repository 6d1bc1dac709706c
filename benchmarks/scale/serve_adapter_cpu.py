#!/usr/bin/env python
"""Small batch server for our fine-tuned checkpoint on a CPU box: reads requests (JSON lines: {"id", "prompt_ids",
"max_new_tokens"}), answers each with the adapter applied, writes JSON lines back. The base is 4-bit and the layers
the RAM budget does not hold are paged to disk.

    python serve_adapter_cpu.py --checkpoint /data/ckpt --requests reqs.jsonl --responses out.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

DEFAULT_REQUESTS = [
    {"id": "warmup", "prompt_ids": [2, 106, 1645, 108], "max_new_tokens": 2},
    {"id": "greeting", "prompt_ids": [2, 106, 2094, 1217, 108], "max_new_tokens": 4},
]


@dataclass
class ServerConfig:
    checkpoint: str
    ram_budget: str = "80MB"
    offload_root: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="serve-offload-"))
    temperature: float = 0.0


class AdapterServer:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.model = None
        self.stats = {"requests": 0, "tokens": 0, "seconds": 0.0}

    def start(self):
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
        base = AutoModelForCausalLM.from_pretrained(os.path.join(self.config.checkpoint, "base"),
                                                    quantization_config=quant, dtype=torch.bfloat16, device_map="cpu")
        model = PeftModel.from_pretrained(base, os.path.join(self.config.checkpoint, "adapter"))
        placement = infer_auto_device_map(model, max_memory={"cpu": self.config.ram_budget},
                                          no_split_module_classes=base._no_split_modules)
        self.model = dispatch_model(model, device_map=placement, offload_dir=self.config.offload_root)
        self.model.eval()
        print(f"server ready: {sorted(set(map(str, placement.values())))}", file=sys.stderr)

    @torch.no_grad()
    def answer(self, request: dict) -> dict:
        started = time.time()
        ids = torch.tensor([request["prompt_ids"]])
        sampling = {"do_sample": True, "temperature": self.config.temperature} if self.config.temperature else {}
        out = self.model.generate(input_ids=ids, max_new_tokens=request.get("max_new_tokens", 16), **sampling)
        new = out[0, ids.shape[1]:].tolist()
        elapsed = time.time() - started
        self.stats["requests"] += 1
        self.stats["tokens"] += len(new)
        self.stats["seconds"] += elapsed
        return {"id": request["id"], "completion_ids": new, "seconds": round(elapsed, 3)}


def read_requests(path: str | None) -> list[dict]:
    if path is None:
        return DEFAULT_REQUESTS
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=os.environ.get("EVAL_CKPT", "/data/ckpt"))
    parser.add_argument("--requests", default=None)
    parser.add_argument("--responses", default=None)
    parser.add_argument("--ram-budget", default=os.environ.get("EVAL_CPU_BUDGET", "80MB"))
    parser.add_argument("--temperature", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = AdapterServer(ServerConfig(args.checkpoint, args.ram_budget, temperature=args.temperature))
    server.start()
    responses = [server.answer(request) for request in read_requests(args.requests)]
    if args.responses:
        with open(args.responses, "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in responses)
    print(json.dumps(server.stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
