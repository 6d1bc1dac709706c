# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family H: silent wrong output after writing back a CPU-repacked 4-bit weight (needs AVX512-BF16).

On a CPU with AVX512-BF16, a no-grad eval forward of `Linear4bit` repacks `weight.data` in place and marks
its quant_state `packing_format_for_cpu` (absmax cast to bf16). accelerate's offload hooks write the stored
weight back with `set_module_tensor_to_device` before every forward; the new parameter carries the repacked
quant_state but the original data layout. No error; the output is wrong. Reference: the same layer with the
AVX512-BF16 path turned off. The tested layer keeps bitsandbytes' own choice of that path: forced on where the CPU
lacks AVX512-BF16, the repacked layout meets a kernel that was never registered and even the first forward is wrong.
"""
import bitsandbytes as bnb
import torch
from accelerate.utils import set_module_tensor_to_device

torch.manual_seed(0)
reference, x = torch.nn.Linear(64, 64), torch.randn(4, 64)
layers = []
for _ in range(2):
    layers.append(bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32))
    layers[-1].load_state_dict(reference.state_dict())
    layers[-1] = layers[-1].to("cpu").eval()  # quantizes
layers[0].support_avx512bf16_for_cpu = False  # the reference never repacks; the other keeps bitsandbytes' choice
lin, stored = layers[1], layers[1].weight.data.clone()  # what an offload hook keeps
with torch.no_grad():
    expected = layers[0](x)
    lin(x)  # repacks in place
    set_module_tensor_to_device(lin, "weight", "cpu", value=stored)  # what the hook does before a forward
    out = lin(x)
error = (out - expected).abs().max().item()
assert error < 0.05, f"CPU-repacked weight written back gives wrong output: max error {error:.2f} (largest output {expected.abs().max():.2f})"
print("output matches the reference")
