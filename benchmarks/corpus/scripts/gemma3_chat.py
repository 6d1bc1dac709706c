#!/usr/bin/env python
"""Scripted multi-turn chat with the Gemma 3 adapter (a regression check before each release).

Each turn is rendered with the tokenizer's chat template, the model answers greedily, and the answer is appended to
the conversation. The base is 4-bit, paged partly to disk under a RAM budget.

    GEMMA3_CKPT=/data/gemma3-80m python gemma3_chat.py --turns 2
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

log = logging.getLogger("gemma3-chat")

SCRIPT = [
    "hello , please explain what a function is in python",
    "now write a short poem about the moon",
    "translate the poem to french",
]
SYSTEM = "you are a helpful assistant . answer short ."


class ChatSession:
    def __init__(self, model, tokenizer, max_new_tokens: int):
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.history: list[dict] = []
        # gemma ends a turn with <end_of_turn>; generation_config lists the ids to stop on
        self.stop_ids = model.generation_config.eos_token_id

    def ask(self, text: str) -> str:
        self.history.append({"role": "user", "content": text if self.history else f"{SYSTEM}\n\n{text}"})
        inputs = self.tokenizer.apply_chat_template(self.history, add_generation_prompt=True, return_tensors="pt",
                                                    return_dict=True)
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      eos_token_id=self.stop_ids)
        reply = self.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        self.history.append({"role": "assistant", "content": reply})
        return reply


def load(ckpt: str, budget: str, offload_dir: str):
    quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                      bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(ckpt, "base"), quantization_config=quantization,
                                                device_map="cpu", dtype=torch.bfloat16)
    model = PeftModel.from_pretrained(base, os.path.join(ckpt, "adapter"))
    device_map = infer_auto_device_map(model, max_memory={"cpu": budget},
                                       no_split_module_classes=base._no_split_modules)
    model = dispatch_model(model, device_map=device_map, offload_dir=offload_dir)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(ckpt, "base"))
    return model, tokenizer


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=os.environ.get("GEMMA3_CKPT", "/data/gemma3-80m"))
    parser.add_argument("--budget", default=os.environ.get("GEMMA3_RAM", "80MB"))
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gemma3-chat-") as offload_dir:
        model, tokenizer = load(args.ckpt, args.budget, offload_dir)
        session = ChatSession(model, tokenizer, args.max_new_tokens)
        for turn, text in enumerate(SCRIPT[: args.turns], 1):
            reply = session.ask(text)
            print(f"[{turn}] user: {text}\n[{turn}] model: {reply}")
        log.info("conversation of %d turns", len(session.history) // 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
