# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2"]
# ///
"""Family J: a 4-bit layer whose output size is not a multiple of 32 cannot run a CPU eval forward.

On a CPU with AVX512-BF16, the first no-grad eval forward of `Linear4bit` repacks its weight for the CPU
kernel, which works on blocks of 32 output rows, and asserts instead of falling back to the plain path.
Real layers have such sizes (SigLIP-so400m's MLP is 1152 -> 4304; classification heads), so a 4-bit model
that holds one cannot run inference on such a CPU at all. 48 = 32 + 16 here.
"""
import bitsandbytes as bnb
import torch

layer = bnb.nn.Linear4bit(64, 48, compute_dtype=torch.float32).to("cpu").eval()  # quantizes
with torch.no_grad():
    out = layer(torch.randn(2, 64))
print("eval forward ran:", tuple(out.shape))
