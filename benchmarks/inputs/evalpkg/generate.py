"""Greedy generation with an adapter on an offloaded base model.

    python -m evalpkg.generate --preset tiny [--tokens N]
"""
import argparse
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

from .settings import PRESETS


def config_for(settings):
    return Gemma4TextConfig(
        vocab_size=128, vocab_size_per_layer_input=128, hidden_size=settings.hidden,
        intermediate_size=2 * settings.hidden, num_hidden_layers=settings.layers, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=16,
        num_kv_shared_layers=settings.kv_shared,
        layer_types=["sliding_attention", "full_attention"] * (settings.layers // 2),
    )


def load(settings, root):
    config = config_for(settings)
    get_peft_model(Gemma4ForCausalLM(config), LoraConfig(target_modules=settings.targets)).save_pretrained(root)
    base = Gemma4ForCausalLM(config)
    base.hf_device_map = {"": "cpu"}  # what from_pretrained(device_map="cpu") records
    device_map = {"": "cpu", **{f"base_model.model.{k}": v for k, v in settings.offload.items()}}
    return PeftModel.from_pretrained(base, root, device_map=device_map, offload_dir=root + "/offload")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m evalpkg.generate")
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--tokens", type=int)
    args = parser.parse_args(argv)
    settings = PRESETS[args.preset]
    torch.manual_seed(0)
    model = load(settings, tempfile.mkdtemp(prefix="gen-"))
    ids = torch.tensor([list(settings.prompt)])
    out = model.generate(ids, max_new_tokens=args.tokens or settings.new_tokens, do_sample=False)
    print(out.tolist())


if __name__ == "__main__":
    main()
