#!/usr/bin/env python
"""Nightly quantization report: load the candidate checkpoint in 4-bit, page its tail to disk the way the edge box
does, score a few prompts, and write a markdown report. Any failure is re-raised as a report failure, so the
cron mail says which stage broke.

Usage: python nightly_quant_report.py [--config extra.ini] [--stage all|load|score]
"""
import argparse
import configparser
import logging
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch
from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, MistralConfig, MistralForCausalLM

DEFAULT_INI = """
[model]
hidden_size = 64
intermediate_size = 128
layers = 3
heads = 4
kv_heads = 2
vocab = 128

[quant]
type = nf4
double = yes

[offload]
disk_layers = 1

[report]
prompts = 5, 17, 42 | 7, 7, 7, 7 | 1, 2, 3
title = nightly 4-bit report
"""

log = logging.getLogger("nightly")


class Stopwatch:
    def __init__(self):
        self.marks = {}
        self._last = time.perf_counter()

    def mark(self, name):
        now = time.perf_counter()
        self.marks[name] = now - self._last
        self._last = now


@dataclass
class Report:
    title: str
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_markdown(self):
        lines = [f"# {self.title}", "", "| prompt | nll | ppl |", "|---|---|---|"]
        lines += [f"| {p} | {nll:.3f} | {math.exp(nll):.1f} |" for p, nll in self.rows]
        return "\n".join(lines + [""] + [f"- {n}" for n in self.notes])


def read_config(extra):
    cfg = configparser.ConfigParser()
    cfg.read_string(DEFAULT_INI)
    if extra and os.path.exists(extra):
        cfg.read(extra)
    return cfg


def build_checkpoint(cfg, where):
    m = cfg["model"]
    config = MistralConfig(hidden_size=m.getint("hidden_size"), intermediate_size=m.getint("intermediate_size"),
                           num_hidden_layers=m.getint("layers"), num_attention_heads=m.getint("heads"),
                           num_key_value_heads=m.getint("kv_heads"), vocab_size=m.getint("vocab"))
    torch.manual_seed(0)
    MistralForCausalLM(config).save_pretrained(where)
    return config


def load_paged(cfg, where, offload_dir):
    q = cfg["quant"]
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=q.get("type"),
                             bnb_4bit_use_double_quant=q.getboolean("double"), bnb_4bit_compute_dtype=torch.float32)
    model = MistralForCausalLM.from_pretrained(where, quantization_config=bnb, device_map={"": "cpu"})
    layers = cfg["model"].getint("layers")
    on_disk = cfg["offload"].getint("disk_layers")
    device_map = {"model.embed_tokens": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    for i in range(layers):
        device_map[f"model.layers.{i}"] = "disk" if i >= layers - on_disk else "cpu"
    return dispatch_model(model, device_map=device_map, offload_dir=offload_dir)


def score(model, prompts):
    rows = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            rows.append((prompt, model(input_ids=ids, labels=ids).loss.item()))
    return rows


def run(args):
    cfg = read_config(args.config)
    watch = Stopwatch()
    report = Report(cfg["report"].get("title"))
    prompts = [[int(t) for t in p.split(",")] for p in cfg["report"].get("prompts").split("|")]
    with tempfile.TemporaryDirectory() as work:
        build_checkpoint(cfg, os.path.join(work, "ckpt"))
        watch.mark("build")
        try:
            model = load_paged(cfg, os.path.join(work, "ckpt"), os.path.join(work, "offload"))
            watch.mark("load")
            if args.stage in ("all", "score"):
                report.rows = score(model, prompts)
                watch.mark("score")
        except Exception as exc:
            log.error("stage failed after %s", list(watch.marks))
            raise RuntimeError(f"nightly report failed: {type(exc).__name__}") from exc
    report.notes = [f"{k}: {v:.2f}s" for k, v in watch.marks.items()]
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default=None)
    parser.add_argument("--stage", default="all", choices=["all", "load", "score"])
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    report = run(args)
    sys.stdout.write(report.to_markdown() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
