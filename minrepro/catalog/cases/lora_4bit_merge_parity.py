# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "peft==0.19.1"]
# ///
"""Family F: `merge_and_unload()` into a 4-bit base does not reproduce the adapter's output.

PEFT dequantizes the base weight, adds the LoRA delta and re-quantizes, so the delta is rounded to NF4.
The same adapter merged into a bf16 copy of the base matches. The script measures both and asserts parity.
"""
import inspect

import bitsandbytes as bnb
import torch
from peft import LoraConfig, LoraModel, get_peft_model


def mlp(linear):
    model = torch.nn.Sequential(linear(64, 256), torch.nn.GELU(), linear(256, 64))
    model.is_loaded_in_4bit = linear is bnb.nn.Linear4bit  # set by from_pretrained; PEFT keys its bnb layers on it
    return model


torch.manual_seed(0)
bf16 = mlp(torch.nn.Linear).to(torch.bfloat16)
nf4 = mlp(bnb.nn.Linear4bit)
nf4.load_state_dict(bf16.state_dict())
nf4 = nf4.to("cpu")  # quantizes
x, error = torch.randn(8, 64, dtype=torch.bfloat16), {}
# a merge option that keeps adapter parity, where this peft offers one (none does on the pinned/newest sets)
parity_option = {"dequantize": True} if "dequantize" in inspect.signature(LoraModel.merge_and_unload).parameters else {}
for name, base in {"nf4": nf4, "bf16": bf16}.items():
    model = get_peft_model(base, LoraConfig(target_modules=["0", "2"], init_lora_weights=False))
    with torch.no_grad():
        adapter_out = model(x).float()
        merged_out = model.merge_and_unload(**parity_option)(x).float()
    error[name] = ((merged_out - adapter_out).norm() / adapter_out.norm()).item()
print(error)
assert error["nf4"] < 0.05, f"merge into 4-bit diverges from the adapter output: relative error {error['nf4']:.3f} (bf16 merge: {error['bf16']:.3f})"
