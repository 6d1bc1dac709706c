# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2"]
# ///
"""Control (passes on every set): a 4-bit layer's CPU forward, in training and eval mode, equals its dequantized
weight's matmul.

The path the bitsandbytes patches change (quant_state copies, the CPU repack on an eval forward, its shape), with
nothing offloaded and no PEFT. A patch that makes this fail is harm.
"""
import bitsandbytes as bnb
import torch
from bitsandbytes.functional import dequantize_4bit

torch.manual_seed(0)
dense = torch.nn.Linear(64, 32)
layer = bnb.nn.Linear4bit(64, 32, compute_dtype=torch.float32, quant_type="nf4")
layer.weight = bnb.nn.Params4bit(dense.weight.data, requires_grad=False, quant_type="nf4").to("cpu")
layer.bias = dense.bias
x = torch.randn(3, 64)
reference = torch.nn.functional.linear(x, dequantize_4bit(layer.weight.data, layer.weight.quant_state), dense.bias)
with torch.no_grad():
    outputs = [layer(x), layer.eval()(x), layer(x), layer.train()(x)]
for out in outputs:  # an AVX512-BF16 CPU's eval kernel rounds (5e-3 here); H's wrong repack was off by 2.74
    torch.testing.assert_close(out, reference, rtol=2e-2, atol=1e-2)
print("4-bit CPU forward, train and eval, equals the dequantized matmul")
