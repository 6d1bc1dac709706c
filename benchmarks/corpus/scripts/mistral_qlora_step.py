#!/usr/bin/env python
"""QLoRA continued training of the Mistral adapter on a RAM-limited CPU worker.

nf4 + double quantization, as in the QLoRA recipe; the adapter is loaded trainable; the layers that do not fit
the worker's RAM are offloaded to disk (accelerate pages them in for each forward and backward). A few optimizer
steps over instruction pairs, logging the loss; `--save` writes the updated adapter.

    MISTRAL_CKPT=/data/mistral-100m python mistral_qlora_step.py --steps 2 --lr 2e-4
"""
import argparse
import logging
import os
import random
import sys
import tempfile
import time

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s", datefmt="%H:%M:%S")
log = logging.getLogger("qlora")

TRAIN_PAIRS = [
    ("write a short poem about the sea", "the sea is blue and the wind is cold"),
    ("what is the capital of france ?", "the capital of france is paris ."),
    ("translate hello world to french", "hello world in french is ..."),
    ("list three colors", "red , green and blue ."),
    ("explain what a function is in python", "a function is code you can call by name ."),
    ("add two plus two", "two plus two equals 4 ."),
]


def parse_args():
    ap = argparse.ArgumentParser(description="QLoRA steps on the CPU worker")
    ap.add_argument("--ckpt", default=os.getenv("MISTRAL_CKPT", "./checkpoints/mistral-100m"))
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--max-len", type=int, default=48)
    ap.add_argument("--ram", default=os.getenv("WORKER_RAM", "120MB"), help="RAM budget for the weights")
    ap.add_argument("--save", default=None, help="write the trained adapter here")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def load_model(args, offload):
    bnb_config = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    model = AutoModelForCausalLM.from_pretrained(
        os.path.join(args.ckpt, "base"), quantization_config=bnb_config, dtype=torch.bfloat16, device_map="cpu"
    )
    model = PeftModel.from_pretrained(model, os.path.join(args.ckpt, "adapter"), is_trainable=True)
    model.print_trainable_parameters()
    dmap = infer_auto_device_map(model, max_memory={"cpu": args.ram},
                                 no_split_module_classes=["MistralDecoderLayer"])
    log.info("offloading %d modules to %s", sum(d == "disk" for d in dmap.values()), offload)
    model = dispatch_model(model, device_map=dmap, offload_dir=offload)
    return model


def make_batch(tokenizer, pairs, max_len):
    """Prompt tokens are masked out of the labels: only the response is trained on."""
    input_ids, labels = [], []
    for prompt, response in pairs:
        chat = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False)
        prompt_ids = tokenizer(chat, add_special_tokens=False)["input_ids"]
        response_ids = tokenizer(" " + response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids = (prompt_ids + response_ids)[:max_len]
        input_ids.append(ids)
        labels.append(([-100] * len(prompt_ids) + response_ids)[:max_len])
    width = max(map(len, input_ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    batch = {
        "input_ids": torch.tensor([ids + [pad] * (width - len(ids)) for ids in input_ids]),
        "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in input_ids]),
        "labels": torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels]),
    }
    return batch


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="qlora-offload-") as offload:
        model = load_model(args, offload)
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(args.ckpt, "base"))
        log.info("model + tokenizer ready in %.1fs", time.time() - t0)

        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.0)
        model.train()
        for step in range(args.steps):
            pairs = random.sample(TRAIN_PAIRS, args.batch_size)
            batch = make_batch(tokenizer, pairs, args.max_len)
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in trainable if p.grad is not None], 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            log.info("step %d/%d loss=%.4f tokens=%d", step + 1, args.steps, loss.item(),
                     int((batch["labels"] != -100).sum()))

        if args.save:
            model.save_pretrained(args.save)
            log.info("adapter saved to %s", args.save)
    log.info("done in %.1fs", time.time() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
