#!/usr/bin/env python
"""Warm-up and smoke test for our Gemma 4 assistant before it takes traffic: loads the 4-bit base and the adapter
the way production does (towers on the CPU, the adapter loaded under a memory budget that spills to disk), then
answers a fixed list of pre-tokenized smoke prompts and checks each produced something.

    python serve_prompts_gemma4.py --checkpoint /srv/models/gemma4 [--max-new-tokens 8]
"""
import argparse
import logging
import os
import sys
import tempfile
import time

import torch
from peft import PeftModel
from transformers import AutoModelForImageTextToText, BitsAndBytesConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("smoke")

# pre-tokenized smoke prompts, pasted from the tokenizer's debug log
# (bos, <start_of_turn>user, text..., <end_of_turn>, <start_of_turn>model)
SMOKE_PROMPTS = {
    "greeting": "2 105 2364 107 9259 236764 1217 659 611 236881 106 107 105 4368 107",
    "weather": "2 105 2364 107 3689 563 506 7606 1645 22335 236881 106 107 105 4368 107",
    "math": "2 105 2364 107 3689 563 236743 236778 900 236743 236778 236881 106 107 105 4368 107",
}


def load(checkpoint, gpu_budget, ram_budget, offload_root):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16, llm_int8_enable_fp32_cpu_offload=True)
    base = AutoModelForImageTextToText.from_pretrained(
        os.path.join(checkpoint, "base"), quantization_config=quant, dtype=torch.bfloat16,
        device_map={"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0},
        offload_folder=os.path.join(offload_root, "base"))
    model = PeftModel.from_pretrained(base, os.path.join(checkpoint, "adapter"),
                                      max_memory={0: gpu_budget, "cpu": ram_budget},
                                      offload_dir=os.path.join(offload_root, "adapter"))
    return model.eval()


@torch.no_grad()
def smoke(model, max_new_tokens):
    failures = 0
    for name, prompt in SMOKE_PROMPTS.items():
        started = time.time()
        ids = torch.tensor([[int(token) for token in prompt.split()]], device="cuda:0")
        out = model.generate(input_ids=ids, max_new_tokens=max_new_tokens, do_sample=False)
        new = out[0, ids.shape[1]:].tolist()
        log.info("%s: %d new tokens in %.2f s", name, len(new), time.time() - started)
        failures += not new
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=os.environ.get("GEMMA4_CKPT", "/srv/models/gemma4"))
    parser.add_argument("--gpu-budget", default="1GiB")
    parser.add_argument("--ram-budget", default="8GiB")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    args = parser.parse_args()
    offload_root = tempfile.mkdtemp(prefix="smoke-offload-")
    model = load(args.checkpoint, args.gpu_budget, args.ram_budget, offload_root)
    log.info("placement: %s", sorted(set(map(str, model.hf_device_map.values()))))
    failures = smoke(model, args.max_new_tokens)
    if failures:
        log.error("%d smoke prompt(s) produced nothing", failures)
        return 1
    log.info("smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
