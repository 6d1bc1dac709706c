"""The root entry's weights land on another GPU than the map says: dispatch_model's main device, from a set.

dispatch_model documents `main_device` as "the first device in the device_map that is not cpu or disk", and runs the
root entry "" on the main device. accelerate 1.15 (#4083) takes it from `set(device_map.values())` instead: for
`{"": 1, "1": 0}` that is 0 (small ints hash to themselves), and the root's weights move to cuda:0.
"""
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
model = dispatch_model(model, device_map={"": 1, "1": 0})
print({name: str(p.device) for name, p in model.named_parameters()})
assert model[0].weight.device == torch.device("cuda", 1), f"the root entry asked for cuda:1, got {model[0].weight.device}"
print(model(torch.randn(2, 4, device=1)).device)
