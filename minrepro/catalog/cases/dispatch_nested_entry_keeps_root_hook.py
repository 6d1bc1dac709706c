# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0"]
# ///
"""Family AC: a map with a root entry and a nested entry on another GPU; the nested entry's children keep the root's hook.

`dispatch_model` hooks the root entry "" first: `attach_execution_device_hook(root, cuda:0)` puts a hook on every
module with weights, the nested entry's children included. The nested entry "1" then gets its own hook, which moves
its weights to cuda:1, but `attach_execution_device_hook` skips children that already have a hook: `1.0` keeps
moving its input to cuda:0 while its weight is on cuda:1. Explore's two-GPU `mat2` rows (Gemma 4, a self_attn or
mlp entry under `{"": 1, ...}`) are this.

Expected: each module runs on the device its map entry names: `1.0` on cuda:1, and the forward returns.
"""
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Linear(4, 4)))
model = dispatch_model(model, device_map={"": 0, "1": 1})
inner = model[1][0]
print("1.0: weight on", inner.weight.device, "| its hook moves inputs to", inner._hf_hook.execution_device)
print("output on", model(torch.randn(2, 4, device=0)).device)
