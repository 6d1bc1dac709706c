"""Adapter export service: loads a 4-bit base, attaches LoRA, dequantizes and merges for export.

A user's script around family G (`dequantize()` then `merge_and_unload()`).
"""
import argparse
import logging
import os
import shutil
import sys
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

log = logging.getLogger("export")


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=int, default=16)
    parser.add_argument("--targets", default="q_proj,v_proj")
    parser.add_argument("--keep", action="store_true")
    return parser.parse_args(argv)


def make_checkpoint(root):
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    path = os.path.join(root, "base")
    LlamaForCausalLM(config).save_pretrained(path)
    log.info("checkpoint at %s", path)
    return path


def load_base(path):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.float32)
    return LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map="cpu")


def attach_adapter(model, args):
    config = LoraConfig(r=args.rank, lora_alpha=args.alpha, target_modules=args.targets.split(","),
                        init_lora_weights=False, lora_dropout=0.0)
    model = get_peft_model(model, config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    log.info("trainable parameters: %d", trainable)
    return model


def sanity_check(model):
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    log.info("logits %s", tuple(logits.shape))
    return logits


def export(model, root):
    model.dequantize()
    merged = model.merge_and_unload()
    out = os.path.join(root, "merged")
    merged.save_pretrained(out)
    return out


def describe(model):
    for name, module in model.named_modules():
        if name.endswith("q_proj"):
            log.debug("%s: %s", name, type(module).__name__)


def main(argv=None):
    args = parse_args(argv if argv is not None else [])
    logging.basicConfig(level=logging.INFO)
    root = tempfile.mkdtemp(prefix="export-")
    try:
        base = load_base(make_checkpoint(root))
        model = attach_adapter(base, args)
        describe(model)
        sanity_check(model)
        out = export(model, root)
        log.info("exported to %s", out)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
