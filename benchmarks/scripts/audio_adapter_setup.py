#!/usr/bin/env python
"""Set up a speech LoRA on Gemma 4: build the model from a config, pick target modules by name across the
language model and the audio tower, attach the adapter and run a smoke forward over a dummy batch."""
import argparse
import logging
import sys
from collections import Counter
from dataclasses import dataclass, field

import torch
from peft import LoraConfig, get_peft_model
from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

log = logging.getLogger("setup")
DEFAULT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class AdapterPlan:
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.05
    targets: list = field(default_factory=lambda: list(DEFAULT_TARGETS))
    include_audio: bool = True


class DummyAudioBatches:
    """Stand-in for the feature-extractor pipeline used in training (not needed for the smoke test)."""

    def __init__(self, n=2, frames=16, features=128):
        self.n, self.frames, self.features = n, frames, features

    def __iter__(self):
        for _ in range(self.n):
            yield torch.randn(1, self.frames, self.features), torch.ones(1, self.frames, dtype=torch.bool)

    def __len__(self):
        return self.n


def build(plan):
    text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1, head_dim=32, global_head_dim=32, vocab_size=128,
                            hidden_size_per_layer_input=16, vocab_size_per_layer_input=128, num_kv_shared_layers=0,
                            layer_types=["sliding_attention", "full_attention"])
    audio = Gemma4AudioConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, use_clipped_linears=True,
                              output_proj_dims=64) if plan.include_audio else None
    torch.manual_seed(0)
    return Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, audio_config=audio, vision_config=None))


def inventory(model, targets):
    """Which modules each target name would hit, by class (for the run log)."""
    hits = Counter()
    for name, module in model.named_modules():
        if name.split(".")[-1] in targets:
            hits[type(module).__name__] += 1
    return dict(hits)


def trainable_report(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable": trainable, "total": total, "ratio": round(trainable / max(total, 1), 4)}


def save_plan(plan, path):
    """Kept for the notebook users: writes the plan next to the adapter."""
    import json
    from dataclasses import asdict

    with open(path, "w") as fh:
        json.dump(asdict(plan), fh, indent=2)


def freeze_towers(model, names=("audio_tower", "vision_tower")):
    for name, param in model.named_parameters():
        if any(part in name for part in names):
            param.requires_grad = False
    return model


def smoke(model):
    ids = torch.tensor([[2, 3, 4, 5]])
    with torch.no_grad():
        return model(input_ids=ids).logits.shape


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--text-only", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.05)
    parser.add_argument("--save-plan", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    plan = AdapterPlan(rank=args.rank, include_audio=not args.text_only, dropout=args.dropout)
    if args.save_plan:
        save_plan(plan, args.save_plan)
    model = build(plan)
    log.info("targets hit: %s", inventory(model, plan.targets))
    config = LoraConfig(r=plan.rank, lora_alpha=plan.alpha, lora_dropout=plan.dropout, target_modules=plan.targets)
    model = get_peft_model(model, config)
    if args.verbose:
        log.debug("trainable: %s", trainable_report(model))
    model = freeze_towers(model)
    model.print_trainable_parameters()
    print("logits", smoke(model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
