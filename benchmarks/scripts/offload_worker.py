"""Inference worker: loads a 4-bit model, offloads part of it, serves a few requests.

A user's script around family A (double-quant Linear4bit + accelerate hooks). It has a decoy: when the
dispatch line is gone, `verify_dispatch` raises the same RuntimeError with the same message from user code.
"""
import argparse
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

log = logging.getLogger("worker")
META_MESSAGE = "Tensor.item() cannot be called on meta tensors"


@dataclass
class WorkerConfig:
    hidden: int = 128
    blocks: int = 3
    double_quant: bool = True
    quant_type: str = "nf4"
    offload_blocks: int = 1
    batch: int = 2
    requests: list = field(default_factory=lambda: ["hello", "world"])


def parse_args(argv):
    parser = argparse.ArgumentParser(description="toy inference worker")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--no-double-quant", action="store_true")
    parser.add_argument("--offload-blocks", type=int, default=1)
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def config_from_args(args):
    return WorkerConfig(hidden=args.hidden, blocks=args.blocks, double_quant=not args.no_double_quant,
                        offload_blocks=args.offload_blocks)


class Adapter(torch.nn.Module):
    """A wrapper without parameters of its own, like PEFT's LoRA layer around the base layer."""

    def __init__(self, base):
        super().__init__()
        self.base = base

    def forward(self, x):
        return self.base(x)


def make_block(cfg):
    linear = bnb.nn.Linear4bit(cfg.hidden, cfg.hidden, compress_statistics=cfg.double_quant,
                               quant_type=cfg.quant_type, compute_dtype=torch.float32)
    return torch.nn.Sequential(Adapter(linear), torch.nn.GELU())


def build_model(cfg):
    torch.manual_seed(0)
    blocks = [make_block(cfg) for _ in range(cfg.blocks)]
    head = torch.nn.Linear(cfg.hidden, 8)
    model = torch.nn.Sequential(*blocks, head)
    log.info("built %d blocks of width %d", cfg.blocks, cfg.hidden)
    return model.to("cpu")  # quantizes the Linear4bit weights


def plan_device_map(model, cfg):
    names = [name for name, _ in model.named_children()]
    plan = {name: "cpu" for name in names}
    for name in names[: cfg.offload_blocks]:
        plan[name] = "disk"
    return plan


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


def verify_dispatch(model):
    if not getattr(model, "_dispatched", False):
        raise RuntimeError(META_MESSAGE)  # decoy: same type and message, from user code


def serve(model, cfg):
    outputs = []
    for request in cfg.requests:
        x = torch.randn(cfg.batch, cfg.hidden)
        with torch.no_grad():
            outputs.append(model(x).sum().item())
        log.info("served %r", request)
    return outputs


def save_report(path, outputs, started):
    with open(path, "w") as fh:
        json.dump({"outputs": outputs, "seconds": time.time() - started}, fh)


def main(argv=None):
    args = parse_args(argv if argv is not None else [])
    logging.basicConfig(level=getattr(logging, args.log_level))
    cfg = config_from_args(args)
    started = time.time()
    model = build_model(cfg)
    log.info("%d parameters", count_parameters(model))
    plan = plan_device_map(model, cfg)
    offload_dir = tempfile.mkdtemp(prefix="worker-")
    try:
        model = dispatch_model(model, device_map=plan, offload_dir=offload_dir)
        model._dispatched = True
    except ValueError as exc:
        log.error("device map rejected: %s", exc)
        return 2
    verify_dispatch(model)
    outputs = serve(model, cfg)
    save_report(os.path.join(offload_dir, "report.json"), outputs, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
