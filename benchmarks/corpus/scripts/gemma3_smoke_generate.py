#!/usr/bin/env python
"""Smoke test after deploying a new Gemma 3 adapter: load it as production does (4-bit, paged to disk under the RAM
budget) and generate a few tokens from a fixed prompt. Exit code 0 means the deployment works."""
import os
import sys
import tempfile

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

CKPT = os.environ.get("GEMMA3_CKPT", "/data/gemma3-80m")
BUDGET = os.environ.get("GEMMA3_RAM", "80MB")
PROMPT = [2, 106, 17, 42, 108, 200, 31]  # bos, start_of_turn and a few ids of the smoke prompt


def main():
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(f"{CKPT}/base", quantization_config=quant, dtype=torch.bfloat16,
                                                device_map="cpu")
    model = PeftModel.from_pretrained(base, f"{CKPT}/adapter")
    device_map = infer_auto_device_map(model, max_memory={"cpu": BUDGET},
                                       no_split_module_classes=base._no_split_modules)
    with tempfile.TemporaryDirectory() as offload:
        model = dispatch_model(model, device_map=device_map, offload_dir=offload)
        out = model.generate(input_ids=torch.tensor([PROMPT]), max_new_tokens=3, do_sample=False)
    new = out[0, len(PROMPT):].tolist()
    print("smoke ok:", new)
    return 0 if len(new) == 3 else 1


if __name__ == "__main__":
    sys.exit(main())
