# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.23.0", "accelerate==1.15.0", "peft==0.21.2"]
# ///
"""Family I: `PeftModel.from_pretrained` on a disk-offloaded model rewrites the base checkpoint in place.

PEFT renames the offloaded weights to its own keys (`base_model.model.…`) and saves them to a "new" file
whose name is the old one with `-peft` added to the first path component holding `--` (a hub cache entry,
`models--ORG--NAME`). A local checkpoint has no such component, so the new file is the old one: the base
checkpoint loses its keys, and the next `from_pretrained` of it loads no weights. (Found when peft's own
offload tests ran against a local stand-in for `gpt2`: the second test loaded a rewritten checkpoint.) The
path is relative, as in `from_pretrained("./my-model")`; an absolute one loses its leading `/` in the same
line instead, and the copy lands under the working directory.
"""
import json
import os
import tempfile

from accelerate import infer_auto_device_map
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, GPT2Config

os.chdir(tempfile.mkdtemp())
root = "."


def checkpoint_keys(path: str) -> set[str]:  # the safetensors header: 8-byte length, then JSON
    with open(path, "rb") as f:
        return set(json.loads(f.read(int.from_bytes(f.read(8), "little")))) - {"__metadata__"}


AutoModelForCausalLM.from_config(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128)).save_pretrained(f"{root}/base")
get_peft_model(AutoModelForCausalLM.from_pretrained(f"{root}/base"), LoraConfig(target_modules=["c_attn"])).save_pretrained(f"{root}/adapter")
before = checkpoint_keys(f"{root}/base/model.safetensors")
max_memory = {"cpu": "500KB"}  # about half the model: the rest goes to disk
device_map = infer_auto_device_map(AutoModelForCausalLM.from_pretrained(f"{root}/base"), max_memory=max_memory)
model = AutoModelForCausalLM.from_pretrained(f"{root}/base", device_map=device_map, offload_folder=f"{root}/offload")
PeftModel.from_pretrained(model, f"{root}/adapter", max_memory=max_memory, offload_folder=f"{root}/offload")
after = checkpoint_keys(f"{root}/base/model.safetensors")
assert after == before, f"PeftModel.from_pretrained rewrote the base checkpoint: {len(before - after)} of {len(before)} keys gone"
print("the base checkpoint is unchanged")
