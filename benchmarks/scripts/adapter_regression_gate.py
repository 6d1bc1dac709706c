#!/usr/bin/env python
"""CI gate for LoRA adapters: evaluate a candidate adapter on the small edge model under the edge box's memory
plan (the biggest modules page to disk first) and fail the pipeline if perplexity regresses past the threshold.

Usage: python adapter_regression_gate.py [--plan edge|full] [--threshold 1.15] [--json out.json]
"""
import argparse
import json
import logging
import math
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

LOG = logging.getLogger("gate")

BASE = {
    "vocab_size": 96,
    "hidden_size": 48,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": True,
}

PLANS = {
    # module budget in parameters: what does not fit on the cpu pages to disk. At full vocab the head is the
    # biggest matrix of the real model, so the edge box always pages it.
    "edge": {"cpu_params": 80_000, "always_page": ["lm_head"], "offload_folder": "pages"},
    "full": {"cpu_params": 10**9, "always_page": [], "offload_folder": None},
}


@dataclass
class GateConfig:
    plan: str = "edge"
    threshold: float = 1.15
    rank: int = 4
    alpha: int = 8
    targets: list = field(default_factory=lambda: ["q_proj", "v_proj"])
    prompts: list = field(default_factory=lambda: [[5, 9, 11, 2], [7, 7, 3], [1, 2, 3, 4, 5, 6]])
    keep_workdir: bool = False


@dataclass
class GateResult:
    plan: str
    device_map: dict
    ppl_base: float = 0.0
    ppl_adapter: float = 0.0
    passed: bool = False
    notes: list = field(default_factory=list)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plan", default="edge", choices=sorted(PLANS))
    parser.add_argument("--threshold", type=float, default=1.15)
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep-workdir", action="store_true")
    parser.add_argument("--debug", action="store_true")
    return parser.parse_args(argv)


def build_base(root):
    torch.manual_seed(1234)
    model = LlamaForCausalLM(LlamaConfig(**BASE))
    model.save_pretrained(os.path.join(root, "base"))
    return os.path.join(root, "base")


def module_sizes(model):
    sizes = {"model.embed_tokens": model.model.embed_tokens.weight.numel(), "model.norm": 48,
             "model.rotary_emb": 0, "lm_head": model.lm_head.weight.numel()}
    for i, layer in enumerate(model.model.layers):
        sizes[f"model.layers.{i}"] = sum(p.numel() for p in layer.parameters())
    return sizes


def plan_device_map(sizes, budget, always_page=()):
    placement, used = {}, 0
    for name, size in sorted(sizes.items(), key=lambda kv: kv[1]):
        fits = used + size <= budget and name not in always_page
        placement[name] = "cpu" if fits else "disk"
        used += size if fits else 0
    return placement


def perplexity(model, prompts):
    losses = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            losses.append(model(input_ids=ids, labels=ids).loss.item())
    return math.exp(sum(losses) / len(losses))


def export_summary(result, path):
    with open(path, "w") as fh:
        json.dump(asdict(result), fh, indent=2)


def gate(cfg, workdir):
    where = build_base(workdir)
    reference = LlamaForCausalLM.from_pretrained(where)
    plan = PLANS[cfg.plan]
    device_map = plan_device_map(module_sizes(reference), plan["cpu_params"], plan["always_page"])
    LOG.info("plan %s: %s", cfg.plan, device_map)
    offload = os.path.join(workdir, plan["offload_folder"]) if plan["offload_folder"] else None
    result = GateResult(cfg.plan, device_map)
    result.ppl_base = perplexity(reference, cfg.prompts)
    del reference
    model = LlamaForCausalLM.from_pretrained(where, device_map=device_map, offload_folder=offload)
    lora = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, target_modules=cfg.targets, lora_dropout=0.0)
    model = get_peft_model(model, lora)
    model.eval()
    result.ppl_adapter = perplexity(model, cfg.prompts)
    result.passed = result.ppl_adapter <= cfg.threshold * result.ppl_base
    result.notes.append(f"ratio {result.ppl_adapter / result.ppl_base:.3f}")
    return result


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO)
    cfg = GateConfig(plan=args.plan, threshold=args.threshold, keep_workdir=args.keep_workdir)
    workdir = tempfile.mkdtemp(prefix="gate-")
    try:
        result = gate(cfg, workdir)
    finally:
        if not cfg.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        export_summary(result, args.json)
    print(f"{'PASS' if result.passed else 'FAIL'}: ppl {result.ppl_base:.2f} -> {result.ppl_adapter:.2f}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
