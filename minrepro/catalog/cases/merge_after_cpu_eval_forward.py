# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "peft==0.19.1"]
# ///
"""Family H, merge: `merge_and_unload()` after a CPU eval forward reads the repacked 4-bit weight wrongly.

On a CPU-only machine with AVX512-BF16, a no-grad eval forward of `Linear4bit` repacks its weight in place
for the CPU kernel. PEFT's 4-bit merge dequantizes it with `bitsandbytes.functional.dequantize_4bit`, which
does not know that layout. So merging an adapter that is a no-op (lora_B = 0, PEFT's default init) changes
the model's output. This is the cause of the large merge errors of the tiny Gemma 4 merge-parity scenario
on CPU (relative error 0.94 for a no-op adapter; 0.0 with the repack turned off).
"""
import bitsandbytes as bnb
import torch
from peft import LoraConfig, get_peft_model

torch.manual_seed(0)
model = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32))
model.is_loaded_in_4bit = True  # set by from_pretrained; PEFT keys its bnb layers on it
model = get_peft_model(model.to("cpu"), LoraConfig(target_modules=["0"]))  # .to quantizes; lora_B = 0
x = torch.randn(4, 64)
model.eval()
with torch.no_grad():
    expected = model(x)  # repacks the weight for the AVX512-BF16 kernel
    out = model.merge_and_unload()(x)
error = (out - expected).abs().max().item()
assert error < 0.05, f"merging a no-op adapter after a CPU eval forward changes the output: max error {error:.2f} (largest output {expected.abs().max():.2f})"
print("merged output matches the adapter's")
