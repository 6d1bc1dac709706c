# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0"]
# ///
"""Family C, accelerate level: a dict that layers share through kwargs is copied by device hooks.

Gemma 4 passes `shared_kv_states={}` to every decoder layer; source layers write into it and shared
layers read from it. accelerate's `send_to_device` rebuilds every Mapping it moves unless its key is in
`skip_keys`, so the source layer writes into a copy. transformers lists the key in
`_skip_keys_device_placement`; a `dispatch_model` call that does not pass it (PEFT's redispatch) loses it.
"""
import tempfile

import torch
from accelerate import dispatch_model


class Layer(torch.nn.Module):
    def __init__(self, publishes):
        super().__init__()
        self.publishes, self.proj = publishes, torch.nn.Linear(8, 8)

    def forward(self, x, shared):
        if self.publishes:  # like Gemma 4's KV-source layers
            shared[0] = self.proj(x)
        return x + shared[0]


class Model(torch.nn.Module):
    _skip_keys_device_placement = ["shared"]  # declared, as transformers does, but not passed below

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(True), Layer(False)])

    def forward(self, x):
        shared = {}
        for layer in self.layers:
            x = layer(x, shared=shared)
        return x


model, x = Model(), torch.randn(2, 8)
expected = model(x)  # the same model, no hooks
model = dispatch_model(model, device_map={"layers.0": "cpu", "layers.1": "disk"}, offload_dir=tempfile.mkdtemp())
out = model(x)
assert torch.allclose(out, expected), f"dispatched output differs: max error {(out - expected).abs().max():.3f}"
print("output matches the reference")
