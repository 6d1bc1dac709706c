# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0"]
# ///
"""Family AD: the root entry's weights land on another GPU than the map says (accelerate 1.15).

`dispatch_model` documents `main_device` as the first device in the map that is not cpu or disk, and runs the root
entry "" on it. Since #4083 (accelerate 1.15) it is taken from `set(device_map.values())` instead: for
`{"": 1, "1": 0}` that is 0 (small ints hash to themselves; for "cuda:N" strings it changes with PYTHONHASHSEED),
and the root's weights move to cuda:0. In explore's two-GPU rows this put most of Gemma 4 on cuda:0 under
`{"": 1, ...}`.

Expected: the root entry's weights stay on cuda:1, where the map puts them (as on accelerate 1.14).
"""
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
model = dispatch_model(model, device_map={"": 1, "1": 0})
print({name: str(p.device) for name, p in model.named_parameters()})
assert model[0].weight.device == torch.device("cuda", 1), f"the root entry asked for cuda:1, got {model[0].weight.device}"
print("output on", model(torch.randn(2, 4, device=1)).device)
