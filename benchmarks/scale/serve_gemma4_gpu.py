#!/usr/bin/env python
"""Tiny batch server for our fine-tuned Gemma 4: reads requests (JSON lines: {"id", "prompt_ids", "max_new_tokens"}),
answers each with the adapter applied, writes JSON lines back. Built for a 16 GB card: the base is 4-bit, the towers
stay on the CPU, and the adapter loads under a memory budget so the rest spills to RAM and disk.

    python serve_gemma4_gpu.py --checkpoint /srv/models/gemma4 --requests reqs.jsonl --responses out.jsonl
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
from peft import PeftModel
from transformers import AutoModelForImageTextToText, BitsAndBytesConfig

DEFAULT_REQUESTS = [
    {"id": "warmup", "prompt_ids": [2, 106, 1645, 108], "max_new_tokens": 4},
    {"id": "greeting", "prompt_ids": [2, 106, 2094, 1217, 108], "max_new_tokens": 12},
]


@dataclass
class ServerConfig:
    checkpoint: str
    gpu_budget: str = "1GiB"
    ram_budget: str = "8GiB"
    offload_root: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="serve-offload-"))
    temperature: float = 0.0


class GemmaServer:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.model = None
        self.stats = {"requests": 0, "tokens": 0, "seconds": 0.0}

    def start(self):
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=torch.bfloat16, llm_int8_enable_fp32_cpu_offload=True)
        placement = {"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0}
        base = AutoModelForImageTextToText.from_pretrained(
            os.path.join(self.config.checkpoint, "base"), quantization_config=quant, dtype=torch.bfloat16,
            device_map=placement, offload_folder=os.path.join(self.config.offload_root, "base"))
        self.model = PeftModel.from_pretrained(
            base, os.path.join(self.config.checkpoint, "adapter"),
            max_memory={0: self.config.gpu_budget, "cpu": self.config.ram_budget},
            offload_dir=os.path.join(self.config.offload_root, "adapter"))
        self.model.eval()
        print(f"server ready: {sorted(set(map(str, self.model.hf_device_map.values())))}", file=sys.stderr)

    @torch.no_grad()
    def answer(self, request: dict) -> dict:
        started = time.time()
        ids = torch.tensor([request["prompt_ids"]], device="cuda:0")
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
    parser.add_argument("--checkpoint", default=os.environ.get("GEMMA4_CKPT", "/srv/models/gemma4"))
    parser.add_argument("--requests", default=None)
    parser.add_argument("--responses", default=None)
    parser.add_argument("--gpu-budget", default=os.environ.get("GEMMA4_GPU_BUDGET", "1GiB"))
    parser.add_argument("--ram-budget", default=os.environ.get("GEMMA4_CPU_BUDGET", "8GiB"))
    parser.add_argument("--temperature", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = GemmaServer(ServerConfig(args.checkpoint, args.gpu_budget, args.ram_budget, temperature=args.temperature))
    server.start()
    responses = [server.answer(request) for request in read_requests(args.requests)]
    if args.responses:
        with open(args.responses, "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in responses)
    print(json.dumps(server.stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
