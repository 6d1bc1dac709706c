#!/usr/bin/env python
"""Request queue in front of our Llama fine-tune on the CPU inference box.

The base checkpoint is loaded in 4-bit, the LoRA adapter goes on top, and whatever does not fit the RAM budget is
paged to disk by accelerate. Requests are prompt token ids (the gateway tokenizes); answers are completion ids.

    LLAMA_CKPT=/data/llama-100m python llama_serve_queue.py --ram-budget 110MB --max-batch 2
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import queue
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

log = logging.getLogger("llama-serve")

CKPT = os.environ.get("LLAMA_CKPT", "/data/llama-100m")

# smoke-test traffic, captured from the gateway (already tokenized)
WARMUP_REQUESTS = [
    {"id": "warmup-1", "prompt_ids": [1, 13055, 18301, 264, 26178, 3302, 21607], "max_new_tokens": 3},
    {"id": "warmup-2", "prompt_ids": [1, 29483, 31051, 22437, 15057, 29455, 263, 8550], "max_new_tokens": 4},
    {"id": "warmup-3", "prompt_ids": [1, 4702, 16931, 12759, 1050, 263, 10618, 27298, 31870], "max_new_tokens": 2},
    {"id": "warmup-4", "prompt_ids": [1, 19199, 13643, 25185, 27298, 25335, 26147, 20486, 5083], "max_new_tokens": 3},
]


@dataclass
class Request:
    id: str
    prompt_ids: list[int]
    max_new_tokens: int = 8
    received: float = field(default_factory=time.time)


class QueueServer:
    def __init__(self, checkpoint: str, ram_budget: str, max_batch: int):
        self.checkpoint = checkpoint
        self.ram_budget = ram_budget
        self.max_batch = max_batch
        self.requests: queue.Queue[Request] = queue.Queue()
        self.model = None
        self.stats = collections.Counter()

    def load(self):
        started = time.time()
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                   bnb_4bit_compute_dtype=torch.bfloat16)
        base = AutoModelForCausalLM.from_pretrained(os.path.join(self.checkpoint, "base"), quantization_config=quant,
                                                    dtype=torch.bfloat16, device_map="cpu")
        model = PeftModel.from_pretrained(base, os.path.join(self.checkpoint, "adapter"))
        device_map = infer_auto_device_map(model, max_memory={"cpu": self.ram_budget},
                                           no_split_module_classes=base._no_split_modules)
        placements = collections.Counter(map(str, device_map.values()))
        log.info("placement: %s", dict(placements))
        self._offload = tempfile.TemporaryDirectory(prefix="llama-off-")  # removed when the server goes away
        self.model = dispatch_model(model, device_map=device_map, offload_dir=self._offload.name)
        self.model.eval()
        self.pad_id = self.model.config.pad_token_id
        log.info("model ready in %.1f s", time.time() - started)

    def submit(self, payload: dict):
        self.requests.put(Request(payload["id"], list(payload["prompt_ids"]), payload.get("max_new_tokens", 8)))

    def _next_batch(self) -> list[Request]:
        batch = []
        while len(batch) < self.max_batch and not self.requests.empty():
            batch.append(self.requests.get_nowait())
        return batch

    @torch.no_grad()
    def _run_batch(self, batch: list[Request]) -> list[dict]:
        width = max(len(r.prompt_ids) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, request in enumerate(batch):  # left padding, as generate wants
            ids[row, width - len(request.prompt_ids):] = torch.tensor(request.prompt_ids)
            mask[row, width - len(request.prompt_ids):] = 1
        budget = max(r.max_new_tokens for r in batch)
        out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=budget, do_sample=False,
                                  pad_token_id=self.pad_id)
        answers = []
        for row, request in enumerate(batch):
            completion = out[row, width:width + request.max_new_tokens].tolist()
            self.stats["tokens"] += len(completion)
            answers.append({"id": request.id, "completion_ids": completion,
                            "latency": round(time.time() - request.received, 3)})
        return answers

    def drain(self) -> list[dict]:
        answers = []
        while batch := self._next_batch():
            self.stats["batches"] += 1
            answers.extend(self._run_batch(batch))
        return answers


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=CKPT)
    parser.add_argument("--ram-budget", default=os.environ.get("LLAMA_RAM_BUDGET", "110MB"))
    parser.add_argument("--max-batch", type=int, default=2)
    parser.add_argument("--requests", help="JSON lines of requests (default: the warmup traffic)")
    args = parser.parse_args()

    server = QueueServer(args.checkpoint, args.ram_budget, args.max_batch)
    server.load()
    if args.requests:
        with open(args.requests) as fh:
            payloads = [json.loads(line) for line in fh if line.strip()]
    else:
        payloads = WARMUP_REQUESTS
    for payload in payloads:
        server.submit(payload)
    for answer in server.drain():
        print(json.dumps(answer))
    log.info("served %d batches, %d tokens", server.stats["batches"], server.stats["tokens"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
