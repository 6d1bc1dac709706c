#!/usr/bin/env python
"""Ask the Qwen3 reasoning adapter a few questions and keep only the final answers.

The adapter was tuned to think inside <think> ... </think> before answering. The prompt is rendered with the chat
template, the thinking block is cut from the generated ids by its token ids, and only the answer is printed.
The base is dispatched first (the first layers in RAM, the rest on disk), then the adapter is loaded on top.

    QWEN3_PATH=/data/qwen3-120m python qwen3_think_chat.py --ram-layers 5
"""
import argparse
import logging
import os
import sys
import tempfile

import torch
from accelerate import dispatch_model
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

QUESTIONS = ["what is two plus two ?", "name the capital of france"]


def split_thinking(ids, think_end):
    """Everything after the last </think> is the answer (no </think>: all of it)."""
    if think_end in ids:
        cut = len(ids) - ids[::-1].index(think_end)
        return ids[:cut], ids[cut:]
    return [], ids


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", default=os.environ.get("QWEN3_PATH", "qwen3-120m"))
    parser.add_argument("--ram-layers", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=6)
    args = parser.parse_args()

    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(args.path, "base"), quantization_config=bnb,
                                                dtype=torch.bfloat16, device_map="cpu")
    layers = base.config.num_hidden_layers
    device_map = {"model.embed_tokens": "cpu", "lm_head": "cpu", "model.rotary_emb": "cpu", "model.norm": "disk"}
    device_map.update({f"model.layers.{i}": "cpu" if i < args.ram_layers else "disk" for i in range(layers)})
    offload = tempfile.TemporaryDirectory(prefix="qwen3-think-")
    base = dispatch_model(base, device_map=device_map, offload_dir=offload.name)
    model = PeftModel.from_pretrained(base, os.path.join(args.path, "adapter")).eval()
    logging.info("%d of %d layers on disk", layers - args.ram_layers, layers)

    tokenizer = AutoTokenizer.from_pretrained(os.path.join(args.path, "base"))
    think_end = tokenizer.convert_tokens_to_ids("</think>")
    for question in QUESTIONS:
        messages = [{"role": "user", "content": question}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "<think>\n"
        inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
        generated = out[0, inputs["input_ids"].shape[1]:].tolist()
        thinking, answer = split_thinking(generated, think_end)
        logging.info("%d thinking tokens", len(thinking))
        print(f"Q: {question}\nA: {tokenizer.decode(answer, skip_special_tokens=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
