#!/usr/bin/env python
"""Preference accuracy of the Qwen2 adapter: does it give the chosen answer a higher log-likelihood than the rejected
one? Reads JSON lines {"prompt", "chosen", "rejected"}, scores both completions in padded batches (prompt tokens
masked out of the labels) and prints the accuracy and the mean margin.

The base is dispatched first (4-bit, the last decoder layers on disk), then the adapter is attached to it.

    QWEN2_DIR=/data/qwen2-100m python qwen2_batch_scorer.py --pairs /data/qwen2-100m/data/pairs.jsonl
"""
import argparse
import json
import logging
import os
import tempfile

import torch
import torch.nn.functional as F
from accelerate import dispatch_model
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, PreTrainedTokenizerFast

logger = logging.getLogger("scorer")


def load_policy(model_dir: str, layers_in_ram: int, offload_dir: str):
    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(os.path.join(model_dir, "base"), quantization_config=config,
                                                dtype=torch.bfloat16, device_map="cpu")
    device_map = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.norm": "cpu", "lm_head": "cpu"}
    for i in range(base.config.num_hidden_layers):
        device_map[f"model.layers.{i}"] = "cpu" if i < layers_in_ram else "disk"
    base = dispatch_model(base, device_map=device_map, offload_dir=offload_dir)
    policy = PeftModel.from_pretrained(base, os.path.join(model_dir, "adapter"))
    return policy.eval()


def encode_pairs(tokenizer, rows):
    """Two sequences per row (chosen, rejected); labels only on the completion."""
    seqs, labels = [], []
    for row in rows:
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        for key in ("chosen", "rejected"):
            answer = tokenizer(" " + row[key], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            seqs.append(prompt + answer)
            labels.append([-100] * len(prompt) + answer)
    width = max(map(len, seqs))
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    attention_mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    label_ids = torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels])
    return input_ids, attention_mask, label_ids


@torch.no_grad()
def sequence_logprobs(model, input_ids, attention_mask, labels):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    targets = labels[:, 1:]
    mask = targets != -100
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (logp * mask).sum(-1)


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(message)s")
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=os.environ.get("QWEN2_DIR", "./qwen2-100m"))
    ap.add_argument("--pairs", default=None, help="default: MODEL_DIR/data/pairs.jsonl")
    ap.add_argument("--layers-in-ram", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=2)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as offload_dir:
        policy = load_policy(args.model_dir, args.layers_in_ram, offload_dir)
        # AutoTokenizer would rebuild a BPE for a qwen2 checkpoint: load the tokenizer.json we trained as it is
        tokenizer = PreTrainedTokenizerFast.from_pretrained(os.path.join(args.model_dir, "base"))
        with open(args.pairs or os.path.join(args.model_dir, "data", "pairs.jsonl")) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]

        wins, margins = 0, []
        for start in range(0, len(rows), args.batch_size):
            chunk = rows[start:start + args.batch_size]
            scores = sequence_logprobs(policy, *encode_pairs(tokenizer, chunk)).view(-1, 2)
            margin = scores[:, 0] - scores[:, 1]
            wins += int((margin > 0).sum())
            margins.extend(margin.tolist())
            logger.info("rows %d-%d: margins %s", start, start + len(chunk) - 1, [round(m, 2) for m in margin.tolist()])
    print(json.dumps({"pairs": len(rows), "accuracy": wins / len(rows), "mean_margin": sum(margins) / len(margins)}))


if __name__ == "__main__":
    main()
