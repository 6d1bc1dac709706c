"""peft#3169 toy variants on two GPUs: INT8 Linear8bitLt layers split over cuda:0 / cuda:1 / cpu, LoRA on both.

Run: python lora_int8_two_gpu_variants.py MAP[+peft-first|+train] [plain]; MAP one of gpu01, gpu10, gpu1cpu,
gpu0cpu_main1 (two GPUs). Its results are on family E's page (docs/families/lora-int8-offload-device.md).
"""
import sys
import bitsandbytes as bnb
import torch
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model

variant = sys.argv[1]
maps = {"gpu01": {"0": 0, "1": 1}, "gpu10": {"0": 1, "1": 0}, "gpu1cpu": {"0": 1, "1": "cpu"},
        "gpu0cpu_main1": {"0": 0, "1": "cpu"}}
kind, _, mode = variant.partition("+")
plain = len(sys.argv) > 2 and sys.argv[2] == "plain"  # the control: the same stack of unquantized nn.Linear
layer = (lambda: torch.nn.Linear(64, 64)) if plain else (lambda: bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False))
model = torch.nn.Sequential(layer(), layer()).to(torch.float16).to(0)
model.is_loaded_in_8bit = not plain
cfg = LoraConfig(target_modules=["0", "1"], init_lora_weights=False)
kw = {"main_device": 1} if kind.endswith("main1") else {}
if mode == "peft-first":
    model = get_peft_model(model, cfg)
    model = dispatch_model(model, device_map={f"base_model.model.{k}": v for k, v in maps[kind].items()}, **kw)
else:
    model = dispatch_model(model, device_map=maps[kind], **kw)
    model = get_peft_model(model, cfg)
hooks = {n: str(m._hf_hook.execution_device) if hasattr(m._hf_hook, "execution_device") else type(m._hf_hook).__name__
         for n, m in model.named_modules() if hasattr(m, "_hf_hook")}
lora = {n: str(p.device) for n, p in model.named_parameters() if "lora" in n}
base = {n: str(p.device) for n, p in model.named_parameters() if "lora" not in n}
print("hooks", hooks, "lora", lora, "base", base, flush=True)
x = torch.randn(2, 64, dtype=torch.float16, device="cuda:0", requires_grad=mode == "train")
if mode == "train":
    model.train()
out = model(x)
if mode == "train":
    out.float().sum().backward()
assert out.device == x.device, f"LoRA output on {out.device}, input on {x.device}"
print("ok output on", out.device)
