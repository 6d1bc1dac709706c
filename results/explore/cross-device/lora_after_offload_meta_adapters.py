"""LoRA attached after dispatch_model to a layer offloaded to cpu (one GPU): where do its adapters live, is the
delta applied in the forward, and what does a backward do?

Run: python lora_after_offload_meta_adapters.py [plain] (one GPU). Its results are on family E's
page (docs/families/lora-int8-offload-device.md).
"""
import sys
import bitsandbytes as bnb
import torch
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model

plain = "plain" in sys.argv
layer = (lambda: torch.nn.Linear(64, 64)) if plain else (lambda: bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False))
torch.manual_seed(0)
model = torch.nn.Sequential(layer(), layer()).to(torch.float16).to(0)
model.is_loaded_in_8bit = not plain
model = dispatch_model(model, device_map={"0": 0, "1": "cpu"})
model = get_peft_model(model, LoraConfig(target_modules=["1"], init_lora_weights=False))
print("lora", {n: str(p.device) for n, p in model.named_parameters() if "lora" in n})
x = torch.randn(2, 64, dtype=torch.float16, device="cuda:0")
with torch.no_grad():
    with model.disable_adapter():
        base = model(x)
    out = model(x)
print("delta applied:", not torch.allclose(out, base), "max |out-base|", (out - base).abs().max().item())
print("lora after forward", {n: str(p.device) for n, p in model.named_parameters() if "lora" in n})
model.train()
model(x.requires_grad_()).float().sum().backward()
print("backward ok")
