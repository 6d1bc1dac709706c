#!/usr/bin/env python
"""Minimal chat backend for the Phi-3 adapter on a small VM.

Conversations come in as JSON lines ({"id", "messages": [...]}); each gets one assistant turn, rendered with the
tokenizer's chat template and stopped at Phi-3's end-of-turn tokens. The 4-bit model gets a RAM cap derived from
its own footprint; accelerate pages the rest to disk.

    PHI3_MODEL_DIR=/data/phi3-100m python phi3_chat_server.py --conversations convs.jsonl --ram-fraction 0.85
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

logger = logging.getLogger("phi3-chat")

DEMO_CONVERSATIONS = [
    {"id": "c1", "messages": [{"role": "system", "content": "answer in one line ."},
                              {"role": "user", "content": "what is the capital of france ?"}]},
    {"id": "c2", "messages": [{"role": "user", "content": "write a short poem about the sun"},
                              {"role": "assistant", "content": "the sun is warm ."},
                              {"role": "user", "content": "now about the moon"}]},
]


class ChatBackend:
    def __init__(self, model_dir: str, ram_fraction: float, max_new_tokens: int):
        self.model_dir = model_dir
        self.ram_fraction = ram_fraction
        self.max_new_tokens = max_new_tokens
        self._offload = tempfile.TemporaryDirectory(prefix="phi3-chat-")

    def start(self):
        t = time.time()
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
        base = AutoModelForCausalLM.from_pretrained(os.path.join(self.model_dir, "base"), quantization_config=bnb,
                                                    dtype=torch.bfloat16, device_map="cpu")
        model = PeftModel.from_pretrained(base, os.path.join(self.model_dir, "adapter"))
        cap = int(base.get_memory_footprint() * self.ram_fraction)
        logger.info("footprint %.1f MB, RAM cap %.1f MB", base.get_memory_footprint() / 1e6, cap / 1e6)
        placement = infer_auto_device_map(model, max_memory={"cpu": cap},
                                          no_split_module_classes=base._no_split_modules)
        self.model = dispatch_model(model, device_map=placement, offload_dir=self._offload.name).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(os.path.join(self.model_dir, "base"))
        # <|end|> closes a turn, <|endoftext|> closes the text
        self.stop = [self.tokenizer.convert_tokens_to_ids("<|end|>"), self.model.config.eos_token_id]
        logger.info("ready in %.1fs, stopping on %s", time.time() - t, self.stop)

    @torch.inference_mode()
    def reply(self, conversation: dict) -> dict:
        enc = self.tokenizer.apply_chat_template(conversation["messages"], add_generation_prompt=True,
                                                 return_tensors="pt", return_dict=True)
        out = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                  eos_token_id=self.stop, pad_token_id=self.model.config.pad_token_id)
        new = out[0, enc["input_ids"].shape[1]:]
        return {"id": conversation["id"], "reply": self.tokenizer.decode(new, skip_special_tokens=True),
                "prompt_tokens": int(enc["input_ids"].shape[1]), "completion_tokens": int(new.numel())}


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=os.environ.get("PHI3_MODEL_DIR", "models/phi3-100m"))
    parser.add_argument("--conversations", help="JSON lines; default: two demo conversations")
    parser.add_argument("--ram-fraction", type=float, default=0.85)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    args = parser.parse_args()

    backend = ChatBackend(args.model_dir, args.ram_fraction, args.max_new_tokens)
    backend.start()
    if args.conversations:
        with open(args.conversations) as fh:
            conversations = [json.loads(line) for line in fh if line.strip()]
    else:
        conversations = DEMO_CONVERSATIONS
    for conversation in conversations:
        print(json.dumps(backend.reply(conversation)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
