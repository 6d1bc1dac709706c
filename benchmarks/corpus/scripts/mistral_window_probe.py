#!/usr/bin/env python
"""Does the Mistral adapter degrade past the sliding window? Scores a sequence a little longer than the model's
`sliding_window`, and compares the loss inside the window with the loss past it.

The model is split by hand: the first half of the decoder layers in RAM, the rest offloaded to disk.

    MISTRAL_CKPT=/data/mistral-100m python mistral_window_probe.py --extra 32
"""
import argparse
import logging
import os
import tempfile

import torch
import torch.nn.functional as F
from accelerate import dispatch_model
from peft import PeftModel
from transformers import AutoConfig, AutoModelForCausalLM, BitsAndBytesConfig

log = logging.getLogger("window-probe")


def half_on_disk(num_layers):
    device_map = {"base_model.model.model.embed_tokens": "cpu", "base_model.model.model.rotary_emb": "cpu"}
    for i in range(num_layers):
        device_map[f"base_model.model.model.layers.{i}"] = "cpu" if i < num_layers // 2 else "disk"
    device_map["base_model.model.model.norm"] = "disk"
    device_map["base_model.model.lm_head"] = "disk"
    return device_map


def main():
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", default=os.environ.get("MISTRAL_CKPT", "mistral-100m"))
    parser.add_argument("--extra", type=int, default=32, help="tokens past the sliding window")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    config = AutoConfig.from_pretrained(os.path.join(args.ckpt, "base"))
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(os.path.join(args.ckpt, "base"), quantization_config=quant,
                                                 dtype=torch.bfloat16, device_map="cpu")
    model = PeftModel.from_pretrained(model, os.path.join(args.ckpt, "adapter"))
    offload = tempfile.TemporaryDirectory(prefix="window-")
    model = dispatch_model(model, device_map=half_on_disk(config.num_hidden_layers), offload_dir=offload.name)
    model.eval()

    window = config.sliding_window or config.max_position_embeddings
    length = window + args.extra
    log.info("sliding window %s, probing %d tokens", config.sliding_window, length)
    gen = torch.Generator().manual_seed(args.seed)
    # skip the control-token block at the start of the vocabulary
    ids = torch.randint(1000, config.vocab_size, (1, length), generator=gen)
    ids[0, 0] = config.bos_token_id
    position_ids = torch.arange(length).unsqueeze(0)

    with torch.no_grad():
        logits = model(input_ids=ids, position_ids=position_ids).logits[0, :-1].float()
    per_token = F.cross_entropy(logits, ids[0, 1:], reduction="none")
    inside = per_token[: window - 1].mean().item()
    past = per_token[window - 1:].mean().item()
    print(f"window={window} length={length} loss_inside={inside:.4f} loss_past={past:.4f} "
          f"delta={past - inside:+.4f}")


if __name__ == "__main__":
    main()
