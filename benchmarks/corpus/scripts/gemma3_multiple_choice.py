#!/usr/bin/env python
"""Zero-shot multiple-choice accuracy of the Gemma 3 adapter.

Each question is scored against its options by the mean log-likelihood of the option's tokens after the question;
the best-scoring option is the prediction. The whole model is offloaded to disk with accelerate (weights loaded on
demand, a few MB of RAM), which is how it runs on the evaluation sidecar.

    GEMMA3_CKPT=/data/gemma3-80m python gemma3_multiple_choice.py
"""
import argparse
import logging
import os
import tempfile

import torch
from accelerate import disk_offload
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(message)s")
log = logging.getLogger(__name__)

QUESTIONS = [
    {"question": "what is the capital of france ?", "options": ["paris", "london", "tokyo"], "answer": 0},
    {"question": "two plus two equals", "options": ["3", "4", "5"], "answer": 1},
    {"question": "the color of the sky is", "options": ["green", "red", "blue"], "answer": 2},
]


def load_model(ckpt, offload_dir):
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(os.path.join(ckpt, "base"), quantization_config=bnb,
                                                 device_map="cpu", dtype=torch.bfloat16)
    model = PeftModel.from_pretrained(model, os.path.join(ckpt, "adapter"))
    model = disk_offload(model, offload_dir=offload_dir, execution_device=torch.device("cpu"))
    return model.eval()


@torch.no_grad()
def option_scores(model, tokenizer, question, options):
    context = [tokenizer.bos_token_id] + tokenizer(question, add_special_tokens=False)["input_ids"]
    scores = []
    for option in options:
        answer = tokenizer(" " + option, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([context + answer])
        labels = torch.tensor([[-100] * len(context) + answer])
        loss = model(input_ids=ids, labels=labels).loss  # mean over the option's tokens
        scores.append(-loss.item())
    return scores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.environ.get("GEMMA3_CKPT", "/data/gemma3-80m"))
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="mc-") as offload_dir:
        model = load_model(args.ckpt, offload_dir)
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(args.ckpt, "base"))
        correct = 0
        items = QUESTIONS[: args.limit] if args.limit else QUESTIONS
        for item in items:
            scores = option_scores(model, tokenizer, item["question"], item["options"])
            pred = max(range(len(scores)), key=scores.__getitem__)
            correct += pred == item["answer"]
            log.info("%s -> %s (%s)", item["question"], item["options"][pred],
                     ", ".join(f"{s:.2f}" for s in scores))
    print(f"accuracy: {correct}/{len(items)} = {correct / len(items):.3f}")


if __name__ == "__main__":
    main()
