#!/usr/bin/env python
"""Offline batch job: complete every request of a JSONL file with the Mistral adapter, in left-padded batches.

Settings come from the environment, as the job scheduler passes them:
  MISTRAL_CKPT   checkpoint folder (base/, adapter/, data/)
  REQUESTS       request file (default: MISTRAL_CKPT/data/prompts.jsonl)
  BATCH_SIZE     requests per batch (default 2)
  RAM_LIMIT      RAM for the weights, the rest is offloaded to disk (default 120MB)
"""
import json
import logging
import os
import sys
import tempfile
import time

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

CKPT = os.environ.get("MISTRAL_CKPT", "/mnt/models/mistral-100m")
REQUESTS = os.environ.get("REQUESTS", os.path.join(CKPT, "data", "prompts.jsonl"))
BATCH_SIZE = int(os.environ.get("BATCH_SIZE", "2"))
RAM_LIMIT = os.environ.get("RAM_LIMIT", "120MB")

log = logging.getLogger("batch")


def load():
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                           bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(f"{CKPT}/base", quantization_config=q, dtype=torch.bfloat16,
                                                device_map="cpu")
    model = PeftModel.from_pretrained(base, f"{CKPT}/adapter")
    dm = infer_auto_device_map(model, max_memory={"cpu": RAM_LIMIT}, no_split_module_classes=base._no_split_modules)
    tmp = tempfile.TemporaryDirectory(prefix="batch-")
    return dispatch_model(model, device_map=dm, offload_dir=tmp.name).eval(), tmp


def batches(rows, size):
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def left_pad(prompts, pad_id, bos_id):
    prompts = [[bos_id, *p] for p in prompts]
    width = max(map(len, prompts))
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.time()
    model, _offload = load()
    cfg = model.config
    pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else cfg.eos_token_id
    with open(REQUESTS) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    log.info("%d requests, model ready in %.1fs", len(rows), time.time() - started)
    done = 0
    for chunk in batches(rows, BATCH_SIZE):
        ids, mask = left_pad([r["prompt_ids"] for r in chunk], pad_id, cfg.bos_token_id)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, pad_token_id=pad_id,
                                 max_new_tokens=max(r.get("max_new_tokens", 8) for r in chunk))
        for row, seq in zip(chunk, out[:, ids.shape[1]:].tolist()):
            print(json.dumps({"id": row["id"], "completion_ids": seq[: row.get("max_new_tokens", 8)]}))
            done += 1
    log.info("completed %d requests in %.1fs", done, time.time() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
