#!/usr/bin/env python
"""Greedy completions for prompts given as token ids, one prompt per line of a text file.

The base (4-bit) and the adapter run with accelerate's CPU offload: every weight stays in RAM off the model, and each
module is loaded back for its forward. Lines starting with '#' are comments.

    CKPT_DIR=/data/llama-100m python llama_ids_file.py --ids prompts.ids.txt --out completions.txt
"""
import argparse
import logging
import os
import sys
import time
from pathlib import Path

import torch
from accelerate import cpu_offload
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

logging.basicConfig(format="%(asctime)s - %(levelname)s - %(message)s", level=logging.INFO)

CKPT_DIR = Path(os.environ.get("CKPT_DIR", "/data/llama-100m"))


def read_ids(path):
    prompts = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            prompts.append([int(tok) for tok in line.split()])
        except ValueError:
            logging.warning("line %d is not a list of ids, skipped", lineno)
    return prompts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", type=Path, default=CKPT_DIR)
    parser.add_argument("--ids", type=Path, default=None, help="default: CKPT/data/prompts.ids.txt")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--new-tokens", type=int, default=4)
    args = parser.parse_args()

    start = time.time()
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(args.ckpt / "base", quantization_config=quant, device_map="cpu",
                                                dtype=torch.bfloat16)
    model = PeftModel.from_pretrained(base, args.ckpt / "adapter")
    model = cpu_offload(model, execution_device=torch.device("cpu"))
    model.eval()
    logging.info("model ready in %.1fs", time.time() - start)

    prompts = read_ids(args.ids or args.ckpt / "data" / "prompts.ids.txt")
    logging.info("%d prompts, longest %d tokens", len(prompts), max(map(len, prompts)))
    bos = model.config.bos_token_id
    lines = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([[bos, *prompt]])
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new_tokens,
                                 do_sample=False)
            lines.append(" ".join(map(str, out[0, ids.shape[1]:].tolist())))
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
