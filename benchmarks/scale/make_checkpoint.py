#!/usr/bin/env python
"""Leave a local checkpoint and a LoRA adapter on disk, as a training job would: random weights at a chosen size.

    python make_checkpoint.py --arch gemma3-100m --out /data/ckpt      # ~110M parameters, CPU, seconds
    python make_checkpoint.py --arch gemma4-e4b --out /data/ckpt       # Gemma 4 E4B dimensions (build on a GPU)

Writes OUT/base (config + safetensors) and OUT/adapter (adapter_config.json + weights). The scale-down benchmark's
input scripts load these; minrepro never sees this file."""

import argparse
import os
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# the released checkpoints' dimensions, as the scenarios know them (standard library only: any env imports it)
from minrepro.scenarios.spec import AUDIO, E2B_TEXT, E4B_TEXT, VISION, text_config


def gemma3_100m():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(
        hidden_size=512,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=128,
        vocab_size=65536,
        sliding_window=256,
    )
    return Gemma3ForCausalLM(config), r".*\.(q_proj|v_proj)"


def gemma4(text):
    from transformers import (
        Gemma4AudioConfig,
        Gemma4Config,
        Gemma4ForConditionalGeneration,
        Gemma4TextConfig,
        Gemma4VisionConfig,
    )

    config = Gemma4Config(
        text_config=Gemma4TextConfig(**text_config(text)),
        vision_config=Gemma4VisionConfig(**VISION["e2b"]),
        audio_config=Gemma4AudioConfig(**AUDIO["e2b"]),
    )
    return Gemma4ForConditionalGeneration(config), r".*language_model.*\.(q_proj|v_proj)"


ARCHES = {"gemma3-100m": gemma3_100m, "gemma4-e2b": lambda: gemma4(E2B_TEXT), "gemma4-e4b": lambda: gemma4(E4B_TEXT)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", choices=sorted(ARCHES), default="gemma3-100m")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):  # an E4B init on CPU takes minutes
        model, targets = ARCHES[args.arch]()
    model.save_pretrained(os.path.join(args.out, "base"))
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=targets, init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(os.path.join(args.out, "adapter"))
    print(f"{args.arch}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters in {args.out}")


if __name__ == "__main__":
    main()
