#!/usr/bin/env python
"""Nightly merge job: fine-tune a LoRA on a 4-bit base for a few steps, then export a merged bf16 model.

Usage: python qlora_merge_job.py --steps 3 --rank 8 --out ./export
"""
import argparse
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

log = logging.getLogger("merge-job")


@dataclass
class JobConfig:
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    vocab: int = 128
    rank: int = 8
    alpha: int = 16
    steps: int = 3
    lr: float = 1e-3
    seed: int = 0
    targets: list = field(default_factory=lambda: ["q_proj", "v_proj"])
    export_dtype: str = "bfloat16"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--out", default=None)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


def build_base(cfg, workdir):
    """Random weights stand in for the production checkpoint (same architecture, tiny)."""
    torch.manual_seed(cfg.seed)
    config = LlamaConfig(hidden_size=cfg.hidden, intermediate_size=cfg.hidden * 2, num_hidden_layers=cfg.layers,
                         num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads, vocab_size=cfg.vocab)
    model = LlamaForCausalLM(config)
    path = os.path.join(workdir, "base")
    model.save_pretrained(path)
    log.info("saved base to %s", path)
    return path


def load_quantized(path):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32)
    return LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map="cpu")


def batches(cfg, n):
    for step in range(n):
        ids = torch.randint(0, cfg.vocab, (2, 8), generator=torch.Generator().manual_seed(step))
        yield {"input_ids": ids, "labels": ids.clone()}


def train(model, cfg):
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr)
    model.train()
    history = []
    for step, batch in enumerate(batches(cfg, cfg.steps)):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        history.append(round(loss.item(), 4))
        log.debug("step %d loss %.4f", step, loss.item())
    return history


def report(history, started):
    return {"losses": history, "seconds": round(time.time() - started, 1)}


def export(model, out_dir, cfg):
    """The release format is a plain bf16 checkpoint: dequantize the base, then fold the adapter into it."""
    model.dequantize()
    merged = model.merge_and_unload()
    merged.to(getattr(torch, cfg.export_dtype))
    if out_dir:
        merged.save_pretrained(out_dir)
    return merged


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr)
    cfg = JobConfig(steps=args.steps, rank=args.rank)
    log.info("config %s", json.dumps(asdict(cfg)))
    started = time.time()
    workdir = tempfile.mkdtemp(prefix="merge-job-")
    base = load_quantized(build_base(cfg, workdir))
    lora = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, target_modules=cfg.targets, lora_dropout=0.0)
    model = get_peft_model(base, lora)
    model.print_trainable_parameters()
    if args.dry_run:
        log.info("dry run: stopping before training")
        return 0
    history = train(model, cfg)
    log.info("trained: %s", report(history, started))
    merged = export(model, args.out, cfg)
    log.info("exported %d parameters", sum(p.numel() for p in merged.parameters()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
