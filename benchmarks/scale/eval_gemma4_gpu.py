#!/usr/bin/env python
"""Evaluate our Gemma 4 LoRA adapter on a single-GPU box: the base loads in 4-bit (double quant) with the vision and
audio towers kept on the CPU, the adapter loads under a GPU/RAM budget (PEFT spreads the model over GPU, RAM and
disk), then a few prompts are generated greedily and timed.

    python eval_gemma4_gpu.py --model-dir /data/gemma4-e4b/base --adapter-dir /data/gemma4-e4b/adapter
"""
import argparse
import json
import logging
import os
import tempfile
import time

import torch
from peft import PeftModel
from transformers import AutoModelForImageTextToText, BitsAndBytesConfig

log = logging.getLogger("gemma4-eval")
CKPT = os.environ.get("GEMMA4_CKPT", "/data/gemma4-e4b")
PROMPTS = [[2, 106, 1645, 108], [2, 106, 2094, 1217, 108], [2, 106, 5123, 108, 3, 4]]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=os.path.join(CKPT, "base"))
    parser.add_argument("--adapter-dir", default=os.path.join(CKPT, "adapter"))
    parser.add_argument("--gpu-budget", default=os.environ.get("GEMMA4_GPU_BUDGET", "1GiB"))
    parser.add_argument("--cpu-budget", default=os.environ.get("GEMMA4_CPU_BUDGET", "8GiB"))
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--out", default=None)
    return parser.parse_args()


def load(args):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16, llm_int8_enable_fp32_cpu_offload=True)
    towers_on_cpu = {"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0}
    started = time.time()
    base = AutoModelForImageTextToText.from_pretrained(args.model_dir, quantization_config=quant, dtype=torch.bfloat16,
                                                       device_map=towers_on_cpu,
                                                       offload_folder=tempfile.mkdtemp(prefix="base-offload-"))
    log.info("base loaded in %.1f s", time.time() - started)
    model = PeftModel.from_pretrained(base, args.adapter_dir, max_memory={0: args.gpu_budget, "cpu": args.cpu_budget},
                                      offload_dir=tempfile.mkdtemp(prefix="adapter-offload-"))
    log.info("adapter loaded: %s", sorted(set(map(str, getattr(model, "hf_device_map", {}).values()))))
    return model.eval()


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args()
    model = load(args)
    rows = []
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([prompt], device="cuda:0")
        started = time.time()
        with torch.no_grad():
            out = model.generate(input_ids=ids, max_new_tokens=args.max_new_tokens, do_sample=False)
        rows.append({"prompt": i, "new_tokens": int(out.shape[1] - ids.shape[1]),
                     "seconds": round(time.time() - started, 2)})
        log.info("prompt %d: %s", i, rows[-1])
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh)
    print(json.dumps({"prompts": len(rows), "tokens": sum(r["new_tokens"] for r in rows)}))


if __name__ == "__main__":
    main()
