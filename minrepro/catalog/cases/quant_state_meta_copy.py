# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family A': the first forward after `cpu_offload` of a quantized Linear4bit.

Offloading moves the weight to meta and keeps its packed data in the weights map, but the quant_state
goes to meta with it. Before the forward the hook writes the packed weight back with
`set_module_tensor_to_device`, whose `Params4bit.to` moves the quant_state along: meta cannot be copied.
"""
import bitsandbytes as bnb
import torch
from accelerate import cpu_offload

model = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32)).to("cpu")  # quantizes
x = torch.randn(2, 64)
expected = model(x)  # the same layer, not offloaded
cpu_offload(model, execution_device="cpu")
out = model(x)
assert torch.allclose(out, expected), f"offloaded output differs: max error {(out - expected).abs().max():.3f}"
print("output matches the reference")
