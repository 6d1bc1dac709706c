"""Evaluate an adapter on an offloaded Gemma 4 text model; every setting comes from a YAML file.

    python offload_eval.py --config offload_eval.yaml [--out results.json]
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import yaml
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4ForCausalLM, Gemma4TextConfig


def load_settings(path):
    with open(path) as fh:
        settings = yaml.safe_load(fh)
    missing = {"model", "lora", "placement", "generation"} - set(settings)
    if missing:
        sys.exit(f"{path}: missing sections {sorted(missing)}")
    return settings


def text_config(section):
    layers = section["num_hidden_layers"]
    return Gemma4TextConfig(
        vocab_size=section["vocab_size"], vocab_size_per_layer_input=section["vocab_size"],
        hidden_size=section["hidden_size"], intermediate_size=section["intermediate_size"], num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, head_dim=section["head_dim"], global_head_dim=section["head_dim"],
        hidden_size_per_layer_input=16, num_kv_shared_layers=section["num_kv_shared_layers"],
        layer_types=["sliding_attention", "full_attention"] * (layers // 2),
    )


def placement_map(section):
    mapping = {"": section["base"]}
    mapping.update({f"base_model.model.{name}": device for name, device in section["offload"].items()})
    return mapping


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--out")
    args = parser.parse_args()
    settings = load_settings(args.config)
    torch.manual_seed(settings.get("seed", 0))
    config = text_config(settings["model"])
    work = tempfile.mkdtemp(prefix="eval-")
    get_peft_model(Gemma4ForCausalLM(config), LoraConfig(**settings["lora"])).save_pretrained(work + "/adapter")
    base = Gemma4ForCausalLM(config)
    base.hf_device_map = {"": settings["placement"]["base"]}  # as the training job's loader leaves it
    model = PeftModel.from_pretrained(base, work + "/adapter", device_map=placement_map(settings["placement"]),
                                      offload_dir=os.path.join(work, settings["placement"]["offload_dir"]))
    results = []
    for prompt in settings["prompts"]:
        ids = torch.tensor([prompt])
        out = model.generate(ids, **settings["generation"])
        results.append(out[0].tolist())
    print(json.dumps(results))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh)


if __name__ == "__main__":
    main()
