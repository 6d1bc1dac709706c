#!/usr/bin/env python
"""Nightly adapter eval on the CPU box: load the local base checkpoint in 4-bit with layers paged to disk, attach the
LoRA adapter under a RAM budget, and report the loss and perplexity on a few held-out batches.

    python eval_adapter.py --model-dir /data/ckpt/base --adapter-dir /data/ckpt/adapter --cpu-budget 80MB
"""
import argparse
import json
import logging
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

log = logging.getLogger("nightly-eval")
CKPT = os.environ.get("EVAL_CKPT", "/data/ckpt")


@dataclass
class EvalSettings:
    batches: int = 3
    batch_size: int = 2
    seq_len: int = 32
    seed: int = 1234
    double_quant: bool = False


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=os.path.join(CKPT, "base"))
    parser.add_argument("--adapter-dir", default=os.path.join(CKPT, "adapter"))
    parser.add_argument("--cpu-budget", default=os.environ.get("EVAL_CPU_BUDGET", "80MB"),
                        help="RAM the adapter load may use; the rest is paged to disk")
    parser.add_argument("--offload-dir", default=None)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--double-quant", action="store_true")
    parser.add_argument("--report", default=None, help="write the metrics as JSON here")
    return parser.parse_args()


def load_model(args, settings):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16,
                               bnb_4bit_use_double_quant=settings.double_quant)
    offload = args.offload_dir or tempfile.mkdtemp(prefix="offload-")
    started = time.time()
    base = AutoModelForCausalLM.from_pretrained(args.model_dir, quantization_config=quant, dtype=torch.bfloat16,
                                                device_map="cpu")
    model = PeftModel.from_pretrained(base, args.adapter_dir)
    log.info("loaded in %.1f s", time.time() - started)
    # page what does not fit the RAM budget to disk (accelerate loads each block back when it runs)
    device_map = infer_auto_device_map(model, max_memory={"cpu": args.cpu_budget},
                                       no_split_module_classes=base._no_split_modules)
    log.info("device map: %s", json.dumps(device_map))
    model = dispatch_model(model, device_map=device_map, offload_dir=offload)
    model.eval()
    return model


def eval_batches(settings, vocab_size):
    generator = torch.Generator().manual_seed(settings.seed)
    for _ in range(settings.batches):
        yield torch.randint(3, vocab_size, (settings.batch_size, settings.seq_len), generator=generator)


@torch.no_grad()
def evaluate(model, settings):
    losses = []
    for step, ids in enumerate(eval_batches(settings, model.config.vocab_size)):
        loss = model(input_ids=ids, labels=ids).loss.item()
        losses.append(loss)
        log.info("batch %d: loss %.3f", step, loss)
    mean = sum(losses) / len(losses)
    return {"loss": round(mean, 4), "perplexity": round(math.exp(min(mean, 50.0)), 2), "batches": len(losses)}


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args()
    settings = EvalSettings(batches=args.batches, double_quant=args.double_quant)
    torch.manual_seed(settings.seed)
    model = load_model(args, settings)
    metrics = evaluate(model, settings)
    metrics["settings"] = asdict(settings)
    if args.report:
        with open(args.report, "w") as fh:
            json.dump(metrics, fh, indent=2)
    print(json.dumps(metrics))


if __name__ == "__main__":
    main()
