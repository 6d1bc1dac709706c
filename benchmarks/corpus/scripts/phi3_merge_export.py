#!/usr/bin/env python
"""Release script for the Phi-3 adapter: check it, then export a merged bf16 checkpoint.

1. sanity-check the adapter as it is deployed (4-bit base, layers that do not fit RAM paged to disk): the loss on a
   short probe must be finite;
2. merge the adapter into a bf16 copy of the base and save it with the tokenizer;
3. compare the merged model's next-token choices with the deployed model's on the same probe.

    PHI3_HOME=/data/phi3-100m python phi3_merge_export.py --out /tmp/phi3-merged
"""
import argparse
import json
import logging
import math
import os
import sys
import tempfile

import torch
from accelerate import dispatch_model, infer_auto_device_map
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

LOG = logging.getLogger("phi3-export")
HOME = os.environ.get("PHI3_HOME", "/data/phi3-100m")
PROBE = "<|user|>\nwrite a short poem about the sea<|end|>\n<|assistant|>\nthe sea is"


def deployed_model(home, ram):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    base = AutoModelForCausalLM.from_pretrained(f"{home}/base", quantization_config=quant, dtype=torch.bfloat16,
                                                device_map="cpu")
    model = PeftModel.from_pretrained(base, f"{home}/adapter")
    placement = infer_auto_device_map(model, max_memory={"cpu": ram}, no_split_module_classes=base._no_split_modules)
    scratch = tempfile.TemporaryDirectory(prefix="phi3-deploy-")
    model = dispatch_model(model, device_map=placement, offload_dir=scratch.name)
    return model.eval(), scratch


def merged_model(home):
    base = AutoModelForCausalLM.from_pretrained(f"{home}/base", dtype=torch.bfloat16)
    return PeftModel.from_pretrained(base, f"{home}/adapter").merge_and_unload().eval()


def probe_batch(tokenizer, config):
    ids = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
    ids = [config.bos_token_id, *ids]
    # pad to a multiple of 8 on the right, with the config's pad id, as the serving stack does
    pad = (-len(ids)) % 8
    input_ids = torch.tensor([ids + [config.pad_token_id] * pad])
    attention_mask = torch.tensor([[1] * len(ids) + [0] * pad])
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return input_ids, attention_mask, labels


@torch.no_grad()
def main():
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", default=HOME)
    parser.add_argument("--ram", default="110MB")
    parser.add_argument("--out", default=None, help="where the merged checkpoint goes (default: a temp dir)")
    args = parser.parse_args()

    deployed, _scratch = deployed_model(args.home, args.ram)
    tokenizer = AutoTokenizer.from_pretrained(f"{args.home}/base")
    input_ids, attention_mask, labels = probe_batch(tokenizer, deployed.config)
    loss = deployed(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.item()
    LOG.info("deployed adapter: probe loss %.3f", loss)
    if not math.isfinite(loss):
        LOG.error("adapter is broken, not exporting")
        return 1

    merged = merged_model(args.home)
    export_dir = None if args.out else tempfile.TemporaryDirectory(prefix="phi3-merged-")  # a dry run
    out = args.out or export_dir.name
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
    LOG.info("merged checkpoint written to %s", out)

    real = attention_mask[0].bool()
    ours = deployed(input_ids=input_ids, attention_mask=attention_mask).logits[0, real].argmax(-1)
    theirs = merged(input_ids=input_ids, attention_mask=attention_mask).logits[0, real].argmax(-1)
    agreement = (ours == theirs).float().mean().item()
    print(json.dumps({"probe_loss": round(loss, 4), "top1_agreement": round(agreement, 3), "out": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
