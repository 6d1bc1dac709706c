"""A two-stage pipeline that shares a cache dict between layers, dispatched across cpu and disk.

A user's script around family C (a dict passed through accelerate hooks is copied). It has a decoy: if the
dispatch line is deleted, the pipeline's own lookup raises the same KeyError from user code.
"""
import argparse
import logging
import sys
import tempfile

import torch
from accelerate import dispatch_model

log = logging.getLogger("pipeline")


class Stage(torch.nn.Module):
    def __init__(self, width, publishes):
        super().__init__()
        self.publishes = publishes
        self.proj = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x, cache):
        if self.publishes:
            cache[0] = self.proj(x)
        return self.norm(x + cache[0])


class Pipeline(torch.nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.stages = torch.nn.ModuleList([Stage(width, i == 0) for i in range(depth)])
        self.head = torch.nn.Linear(width, 4)

    def forward(self, x):
        cache = {}
        for stage in self.stages:
            x = stage(x, cache=cache)
        return self.head(x)


def lookup(cache, key):
    if key not in cache:
        raise KeyError(key)  # decoy: the same KeyError from user code
    return cache[key]


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    return parser.parse_args(argv)


def device_map(depth):
    plan = {f"stages.{i}": "cpu" for i in range(depth)}
    plan["stages.1"] = "disk"
    plan["head"] = "cpu"
    return plan


def run(args):
    torch.manual_seed(0)
    model = Pipeline(args.width, args.depth)
    dispatched = False
    model = dispatch_model(model, device_map=device_map(args.depth), offload_dir=tempfile.mkdtemp())
    dispatched = True
    warm = {}
    if not dispatched:
        lookup(warm, 0)
    x = torch.randn(args.batch, args.width)
    with torch.no_grad():
        y = model(x)
    log.info("output %s", tuple(y.shape))
    return y


def main(argv=None):
    logging.basicConfig(level=logging.INFO)
    args = parse_args(argv if argv is not None else [])
    for attempt in range(2):
        try:
            run(args)
            break
        except RuntimeError as exc:
            log.warning("attempt %d failed: %s", attempt, exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
