"""A map with a root entry and a nested entry on another GPU: the nested entry's children keep the root's hook.

dispatch_model hooks the root entry first: `attach_execution_device_hook(root, root_device)` puts a hook on every
module with weights, the nested entry's children included. The nested entry then gets its own hook (which moves its
weights to its device), but `attach_execution_device_hook` skips children that already have one: they keep moving
their inputs to the root's device while their weights are on the entry's. Explore's two-GPU `mat2` rows.
"""
import torch
from accelerate import dispatch_model

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Linear(4, 4)))
model = dispatch_model(model, device_map={"": 0, "1": 1})
inner = model[1][0]
print("inner weight on", inner.weight.device, "| its hook moves inputs to", inner._hf_hook.execution_device)
print(model(torch.randn(2, 4, device=0)).device)
