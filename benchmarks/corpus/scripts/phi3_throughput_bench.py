#!/usr/bin/env python
"""Forward-pass throughput of the Phi-3 adapter with disk offload, for sizing the CPU fleet.

Random token ids (drawn over the model's vocabulary) at a few batch shapes; prints tokens per second per shape.

    PHI3_HOME=/data/phi3-100m python phi3_throughput_bench.py --shapes 1x16,2x16 --repeats 2
"""
import argparse
import logging
import os
import tempfile
import time

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

log = logging.getLogger("bench")


def parse_shapes(text):
    return [tuple(int(n) for n in shape.split("x")) for shape in text.split(",")]


def load(home, ram, offload_dir):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(home, "base"), quantization_config=quant,
                                                dtype=torch.bfloat16, device_map="cpu")
    model = PeftModel.from_pretrained(base, os.path.join(home, "adapter"))
    device_map = infer_auto_device_map(model, max_memory={"cpu": ram}, no_split_module_classes=base._no_split_modules)
    log.info("disk entries: %d", sum(v == "disk" for v in device_map.values()))
    return dispatch_model(model, device_map=device_map, offload_dir=offload_dir).eval()


def main():
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", default=os.environ.get("PHI3_HOME", "/data/phi3-100m"))
    ap.add_argument("--ram", default="110MB")
    ap.add_argument("--shapes", default="1x16,2x16")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as offload_dir:
        model = load(args.home, args.ram, offload_dir)
        vocab = model.config.vocab_size
        for batch, length in parse_shapes(args.shapes):
            ids = torch.randint(0, vocab, (batch, length))
            timings = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                with torch.no_grad():
                    model(input_ids=ids)
                timings.append(time.perf_counter() - t)
            best = min(timings)
            print(f"{batch}x{length}: {batch * length / best:.1f} tok/s (best of {args.repeats})")


if __name__ == "__main__":
    main()
