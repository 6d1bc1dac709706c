#!/usr/bin/env python
"""Resume QLoRA fine-tuning of Gemma 4 from our last adapter checkpoint on a small card: 4-bit base (double quant),
towers on the CPU, the adapter reloaded trainable under a memory budget, then a few optimizer steps on a synthetic
batch and a checkpoint save. Used as the nightly smoke test of the training box.

    python qlora_step_gemma4_gpu.py --base /ckpt/gemma4/base --adapter /ckpt/gemma4/adapter --steps 2
"""
import argparse
import math
import os
import random
import tempfile

import torch
from peft import PeftModel
from transformers import AutoModelForImageTextToText, BitsAndBytesConfig

SEED = 1234
ROOT = os.environ.get("GEMMA4_CKPT", "/ckpt/gemma4")


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--base", default=f"{ROOT}/base")
    p.add_argument("--adapter", default=f"{ROOT}/adapter")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--gpu-mem", default=os.environ.get("GEMMA4_GPU_BUDGET", "1GiB"))
    p.add_argument("--cpu-mem", default=os.environ.get("GEMMA4_CPU_BUDGET", "8GiB"))
    p.add_argument("--save-to", default=None)
    return p.parse_args()


def synthetic_batch(seq_len, vocab=4096):
    ids = torch.tensor([[random.randrange(3, vocab) for _ in range(seq_len)]], device="cuda:0")
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def build_model(args):
    bnb = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        llm_int8_enable_fp32_cpu_offload=True,
    )
    base = AutoModelForImageTextToText.from_pretrained(
        args.base,
        quantization_config=bnb,
        dtype=torch.bfloat16,
        device_map={"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0},
        offload_folder=tempfile.mkdtemp(),
    )
    base.config.use_cache = False
    model = PeftModel.from_pretrained(
        base,
        args.adapter,
        is_trainable=True,
        max_memory={0: args.gpu_mem, "cpu": args.cpu_mem},
        offload_dir=tempfile.mkdtemp(),
    )
    model.print_trainable_parameters()
    return model


def main():
    args = get_args()
    random.seed(SEED)
    torch.manual_seed(SEED)
    model = build_model(args)
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=args.lr)
    model.train()
    for step in range(args.steps):
        batch = synthetic_batch(args.seq_len)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.4f}")
        if not math.isfinite(loss.item()):
            raise SystemExit("loss is not finite")
    if args.save_to:
        model.save_pretrained(args.save_to)


if __name__ == "__main__":
    main()
