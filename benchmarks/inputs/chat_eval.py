"""Answer a few questions with our adapter, loaded the way the 16 GB box loads it (the head offloaded to disk).

    python chat_eval.py --checkpoint chat_ckpt [--max-new-tokens 4]

The checkpoint folder holds the tokenizer, the base model (base/) and the adapter (adapter/).
"""
import argparse
import os
import tempfile

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

QUESTIONS = [
    "how do i offload a model to disk",
    "why my adapter fails to load after dispatch",
    "what lora does with quantized weights",
]


def load(checkpoint):
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(checkpoint, "base"))
    base.hf_device_map = {"": "cpu"}  # as device_map="auto" leaves it on a box without a GPU
    model = PeftModel.from_pretrained(base, os.path.join(checkpoint, "adapter"),
                                      device_map={"": "cpu", "base_model.model.lm_head": "disk"},
                                      offload_dir=tempfile.mkdtemp(prefix="chat-offload-"))
    return tokenizer, model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="chat_ckpt")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    args = parser.parse_args()
    tokenizer, model = load(args.checkpoint)
    for question in QUESTIONS:
        batch = tokenizer(question, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=args.max_new_tokens, do_sample=False)
        answer = tokenizer.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        print(f"Q: {question}\nA: {answer}\n")


if __name__ == "__main__":
    main()
