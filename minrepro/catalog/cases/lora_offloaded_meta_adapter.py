# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "peft==0.19.1"]
# ///
"""Family T: LoRA added after dispatch to an offloaded layer computes with `meta` adapter weights, and the forward
returns whatever memory held, silently.

PEFT moves each adapter to its base weight's device; an offloaded base weight is a `meta` placeholder (its hook loads
the values for each call), so the adapters land on `meta`, values lost. torch's cpu matmul then accepts a `meta`
weight (`cpu_x @ meta_w` returns an uninitialized cpu tensor; no device check), so no error is raised. The same
adapters on a layer that is not offloaded, same seed, give the reference. Found by a realistic script (`get_peft_model`
on a tiny Llama with disk layers: NaN perplexity).
"""
import copy
import tempfile

import torch
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model

torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
x = torch.randn(2, 8)
lora = LoraConfig(target_modules=["1"], r=2, init_lora_weights=False)  # random A and B: the adapter changes the output
torch.manual_seed(1)
reference = get_peft_model(copy.deepcopy(base), lora)(x)
model = dispatch_model(base, device_map={"0": "cpu", "1": "disk"}, offload_dir=tempfile.mkdtemp())
hook = getattr(model[1], "_hf_hook", None)
assert hook is not None and hook.offload, "not the branch in question: layer 1 has no offloading hook"
torch.manual_seed(1)
out = get_peft_model(model, lora)(x)
error = (out - reference).abs().max().item()
assert error < 1e-5, f"LoRA on an offloaded layer changed the output: max error {error:.3g}"
print("LoRA on a disk-offloaded layer: output equals the same adapter's on a layer in memory")
