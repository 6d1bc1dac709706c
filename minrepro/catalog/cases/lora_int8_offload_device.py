# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0", "peft==0.19.1"]
# ///
"""Family E (CUDA): LoRA on a bitsandbytes INT8 `Linear8bitLt` whose base layer is CPU-offloaded.

peft#3169 reports that the base layer's output lands on the CPU while the LoRA delta is on CUDA, and
PR #3181 (closed for want of a reproducer) normalized it with `result.to(x.device)`. Here: two INT8
layers quantized on CUDA, the second offloaded to CPU by `dispatch_model`, LoRA attached on both, one
forward with a CUDA input; the output must come back on the input's device.
"""
import bitsandbytes as bnb
import torch
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model

model = torch.nn.Sequential(bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False),
                            bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False)).to(torch.float16).to(0)
model.is_loaded_in_8bit = True  # set by from_pretrained(load_in_8bit); PEFT keys its bnb layers on it
model = dispatch_model(model, device_map={"0": 0, "1": "cpu"})
model = get_peft_model(model, LoraConfig(target_modules=["0", "1"], init_lora_weights=False))
x = torch.randn(2, 64, dtype=torch.float16, device="cuda")
out = model(x)
assert out.device == x.device, f"LoRA output on {out.device}, input on {x.device}"
print("output on", out.device)
