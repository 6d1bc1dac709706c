#!/usr/bin/env python
"""Held-out loss of the Qwen2 adapter, on the CPU runner.

Reads the eval set (JSON lines with pre-tokenized `input_ids`), batches it with padding and labels, and reports the
loss and perplexity. The 4-bit base does not fit the runner's RAM with the adapter on it, so the second half of the
decoder stack lives on disk (a hand-written device map: accelerate's own guess puts everything on disk here).

    QWEN2_DIR=/data/qwen2-100m python qwen2_eval_jsonl.py --eval-file /data/qwen2-100m/data/eval.jsonl
"""
import argparse
import json
import logging
import math
import os
import tempfile
import time

import torch
from accelerate import dispatch_model
from peft import PeftModel
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

logger = logging.getLogger(__name__)

MODEL_DIR = os.environ.get("QWEN2_DIR", os.path.expanduser("~/models/qwen2-100m"))


def build_device_map(config, disk_from: float):
    """Embeddings, head and the first layers in RAM, the rest of the decoder on disk."""
    layers = config.num_hidden_layers
    first_on_disk = int(layers * disk_from)
    device_map = {"model.embed_tokens": "cpu", "lm_head": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu"}
    for i in range(layers):
        device_map[f"model.layers.{i}"] = "cpu" if i < first_on_disk else "disk"
    # the adapter wraps the model: PeftModel's module names are prefixed
    return {f"base_model.model.{name}": where for name, where in device_map.items()}


def load(model_dir, disk_from, offload_dir):
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(model_dir, "base"), quantization_config=bnb,
                                                dtype=torch.bfloat16, device_map="cpu")
    model = PeftModel.from_pretrained(base, os.path.join(model_dir, "adapter"))
    device_map = build_device_map(base.config, disk_from)
    logger.info("%d entries on disk", sum(v == "disk" for v in device_map.values()))
    model = dispatch_model(model, device_map=device_map, offload_dir=offload_dir)
    return model.eval()


def read_eval_set(path, limit=None):
    with open(path) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:limit] if limit else rows


class Collator:
    def __init__(self, pad_id, max_len):
        self.pad_id = pad_id
        self.max_len = max_len

    def __call__(self, rows):
        seqs = [r["input_ids"][: self.max_len] for r in rows]
        width = max(map(len, seqs))
        input_ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(seqs), width), -100, dtype=torch.long)
        attention = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, seq in enumerate(seqs):
            input_ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, : len(seq)] = torch.tensor(seq)
            attention[i, : len(seq)] = 1
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


@torch.no_grad()
def evaluate(model, loader):
    total, tokens = 0.0, 0
    for step, batch in enumerate(loader):
        out = model(**batch)
        n = int((batch["labels"][:, 1:] != -100).sum())
        total += out.loss.item() * n
        tokens += n
        logger.info("step %d: loss %.4f over %d tokens", step, out.loss.item(), n)
    mean = total / max(tokens, 1)
    return {"loss": round(mean, 4), "ppl": round(math.exp(min(mean, 30)), 2), "tokens": tokens}


def main():
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
    p = argparse.ArgumentParser()
    p.add_argument("--model-dir", default=MODEL_DIR)
    p.add_argument("--eval-file", default=None, help="default: MODEL_DIR/data/eval.jsonl")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--disk-from", type=float, default=0.5, help="fraction of the layers kept in RAM")
    args = p.parse_args()

    t0 = time.time()
    offload = tempfile.TemporaryDirectory(prefix="qwen2-eval-")
    model = load(args.model_dir, args.disk_from, offload.name)
    logger.info("loaded in %.1fs", time.time() - t0)

    eval_file = args.eval_file or os.path.join(args.model_dir, "data", "eval.jsonl")
    rows = read_eval_set(eval_file, args.limit)
    # Qwen2 has no pad token in its config: pad with <|endoftext|>, which the generation config names
    pad_id = model.config.pad_token_id
    if pad_id is None:
        pad_id = model.generation_config.pad_token_id or model.config.bos_token_id
    loader = DataLoader(rows, batch_size=args.batch_size, collate_fn=Collator(pad_id, args.max_len))
    metrics = evaluate(model, loader)
    metrics["examples"] = len(rows)
    print(json.dumps(metrics))


if __name__ == "__main__":
    main()
