#!/usr/bin/env python
"""How far does the deployed Llama adapter drift from the base model? KL(adapter || base) per prompt.

The adapter model is the one we deploy: 4-bit base + LoRA, paged to disk under the RAM budget. The reference is the
plain base checkpoint in bf16, loaded beside it. Prompts are the request log's token ids (JSON lines with
"prompt_ids").

    LLAMA_CKPT=/data/llama-100m python llama_reference_kl.py --requests /data/llama-100m/data/prompts.jsonl
"""
import argparse
import json
import logging
import os
import statistics
import tempfile

import torch
import torch.nn.functional as F
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

log = logging.getLogger("kl")
CKPT = os.environ.get("LLAMA_CKPT", "/data/llama-100m")


def deployed(ckpt, budget, offload_dir):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(f"{ckpt}/base", quantization_config=quant, dtype=torch.bfloat16,
                                                device_map="cpu")
    model = PeftModel.from_pretrained(base, f"{ckpt}/adapter")
    dmap = infer_auto_device_map(model, max_memory={"cpu": budget}, no_split_module_classes=base._no_split_modules)
    return dispatch_model(model, device_map=dmap, offload_dir=offload_dir).eval()


def reference(ckpt):
    return AutoModelForCausalLM.from_pretrained(f"{ckpt}/base", dtype=torch.bfloat16).eval()


@torch.no_grad()
def kl_per_prompt(model, ref, prompts):
    results = []
    for prompt in prompts:
        ids = torch.tensor([prompt])
        p = F.log_softmax(model(input_ids=ids).logits.float(), dim=-1)
        q = F.log_softmax(ref(input_ids=ids).logits.float(), dim=-1)
        kl = F.kl_div(q, p, log_target=True, reduction="none").sum(-1).mean().item()
        results.append(kl)
    return results


def main():
    logging.basicConfig(level=logging.INFO)
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=CKPT)
    ap.add_argument("--requests", default=None, help="default: CKPT/data/prompts.jsonl")
    ap.add_argument("--budget", default="110MB")
    args = ap.parse_args()

    offload_dir = tempfile.TemporaryDirectory(prefix="kl-")
    model = deployed(args.ckpt, args.budget, offload_dir.name)
    ref = reference(args.ckpt)
    with open(args.requests or f"{args.ckpt}/data/prompts.jsonl") as fh:
        prompts = [json.loads(line)["prompt_ids"] for line in fh if line.strip()]
    kls = kl_per_prompt(model, ref, prompts)
    for prompt, kl in zip(prompts, kls):
        log.info("%3d tokens: KL %.4f", len(prompt), kl)
    print(json.dumps({"prompts": len(kls), "kl_mean": statistics.mean(kls), "kl_max": max(kls)}))


if __name__ == "__main__":
    main()
