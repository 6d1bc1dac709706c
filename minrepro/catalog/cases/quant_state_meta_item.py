# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family A: hook attachment calls `state_dict()` on a module whose 4-bit quant_state is on meta.

`dispatch_model` offloads the block first: `Params4bit.to("meta")` moves the (shared) double-quant
quant_state to meta in place. Then `attach_execution_device_hook` asks a parameter-less container (here a
Sequential; in the seeds PEFT's LoRA wrapper) `len(module.state_dict()) > 0`, which serializes the
quant_state with `as_dict(packed=True)` and calls `.item()` on the meta `offset`.
"""
import tempfile

import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

inner = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compress_statistics=True))  # double quant
model = torch.nn.Sequential(torch.nn.Sequential(inner), torch.nn.Linear(64, 64)).to("cpu")  # .to quantizes
x = torch.randn(2, 64)
expected = model(x)  # the same model, not offloaded
dispatch_model(model, device_map={"0": "disk", "1": "cpu"}, offload_dir=tempfile.mkdtemp())
out = model(x)
assert torch.allclose(out, expected), f"offloaded output differs: max error {(out - expected).abs().max():.3f}"
print("output matches the reference")
