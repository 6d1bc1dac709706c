# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family H, the path a user takes: `cpu_offload` of a 4-bit model, then no-grad eval forwards on the CPU.

Unpatched, the first forward crashes (family A': the offloaded quant_state is on meta). Once that is fixed,
the first forward repacks the weight for AVX512-BF16 and every later forward reads the weight the hook wrote
back with the repacked quant_state: no error, wrong output (family H). Each forward is compared with the
same model run without offload. The repack is bitsandbytes' own choice (`support_avx512bf16_for_cpu`): True only
with its CPU library on an AVX512-BF16 CPU. Elsewhere (its CUDA library, or another CPU) the A' patch alone
makes this pass.
"""
import bitsandbytes as bnb
import torch
from accelerate import cpu_offload

torch.manual_seed(0)
model = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32), torch.nn.Linear(64, 64))
model = model.to("cpu").eval()  # quantizes
x = torch.randn(4, 64)
repack = model[0].support_avx512bf16_for_cpu
model[0].support_avx512bf16_for_cpu = False
with torch.no_grad():
    expected = model(x)  # the same weights, no offload, no CPU repacking
model[0].support_avx512bf16_for_cpu = repack
cpu_offload(model, execution_device="cpu")
with torch.no_grad():
    errors = [(model(x) - expected).abs().max().item() for _ in range(3)]
assert max(errors) < 0.05, f"offloaded eval forwards give wrong output: max error per forward {[round(e, 2) for e in errors]}"
print("every forward matches the reference")
