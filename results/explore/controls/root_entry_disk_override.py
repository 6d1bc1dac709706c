"""Is "any disk entry in a Gemma 4 base map fails at load" Gemma 4's? A tiny Llama (no quantization, no PEFT,
CPU only) loaded with one layer on disk: with a root "" entry beside it, and with the same placement spelled out
module by module.

Run: python root_entry_disk_override.py (any of the three sets). Recorded in docs/findings.md: the root-entry map
fails with `weight is on the meta device` on pinned, reporter and newest; the spelled-out map loads with layer 1
really on disk (`hf_device_map` says disk, its weights are meta placeholders) and runs a forward.
"""
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

root = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained(root + "/base")
maps = {"root entry": {"": "cpu", "model.layers.1": "disk"},
        "spelled out": {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
                        "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}}
for name, device_map in maps.items():
    try:
        model = LlamaForCausalLM.from_pretrained(root + "/base", device_map=device_map,
                                                 offload_folder=tempfile.mkdtemp())
        # a load proves nothing unless layer 1 really went to disk: its weights are then meta placeholders
        on_disk = sorted(k for k, v in model.hf_device_map.items() if v == "disk")
        placeholder = model.model.layers[1].mlp.up_proj.weight.device
        logits = model(input_ids=torch.tensor([[1, 2, 3]])).logits
        print(f"{name}: loads; on disk {on_disk}, layer 1 weight on {placeholder}; forward {tuple(logits.shape)}")
    except Exception as exc:
        print(f"{name}: {type(exc).__name__}: {exc}")
