#!/usr/bin/env python
"""Generate replies for a list of prompts with the Qwen3 adapter through a transformers pipeline.

The 4-bit base plus adapter is dispatched by accelerate under a RAM cap (the overflow goes to an offload folder on
disk), then handed to `pipeline("text-generation")` with the checkpoint's tokenizer.

    export QWEN3_PATH=/data/qwen3-120m
    python qwen3_pipeline.py "write a short poem about the sea" "what is the capital of france ?"
"""
import argparse
import json
import logging
import os
import tempfile

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, pipeline

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger("qwen3-pipe")

QWEN3_PATH = os.environ.get("QWEN3_PATH", "Qwen3-120M-ft")
OFFLOAD = tempfile.TemporaryDirectory(prefix="qwen3-offload-")
DEFAULT_PROMPTS = ["write a short poem about the sea", "what is the capital of france ?"]


def get_model(path: str, max_cpu_memory: str):
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(f"{path}/base", quantization_config=bnb, device_map="cpu",
                                                 dtype=torch.bfloat16)
    model = PeftModel.from_pretrained(model, f"{path}/adapter", adapter_name="sft")
    max_memory = {"cpu": max_cpu_memory}
    device_map = infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=["Qwen3DecoderLayer"])
    logger.info("device map has %d entries", len(device_map))
    return dispatch_model(model, device_map=device_map, offload_dir=OFFLOAD.name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("prompts", nargs="*", default=DEFAULT_PROMPTS)
    parser.add_argument("--model", default=QWEN3_PATH)
    parser.add_argument("--max-cpu-memory", default="165MB")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    args = parser.parse_args()

    model = get_model(args.model, args.max_cpu_memory)
    tokenizer = AutoTokenizer.from_pretrained(f"{args.model}/base")
    generator = pipeline("text-generation", model=model, tokenizer=tokenizer)

    for prompt in args.prompts:
        messages = [{"role": "user", "content": prompt}]
        out = generator(messages, max_new_tokens=args.max_new_tokens, do_sample=False)
        reply = out[0]["generated_text"][-1]["content"]
        print(json.dumps({"prompt": prompt, "reply": reply}))


if __name__ == "__main__":
    main()
