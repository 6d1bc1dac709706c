# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family N (CUDA): the backward through a CPU-offloaded bitsandbytes INT8 `Linear8bitLt` finds `state.SCB` None.

`MatMul8bitLt.forward` saves the layer's `MatmulLtState` object for its backward (`ctx.state = state`); accelerate's
offload hook then frees the layer's statistics in place after the forward (`module.state.SCB = None` in
`AlignDevicesHook.post_forward`), so the backward's `state.SCB.unsqueeze(1)` raises. Found in peft#3169's reporter's
own training script (INT8, `device_map="auto"` with a small GPU budget, LoRA, gradient checkpointing) on the H100.
"""
import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False),
                            bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False)).to(torch.float16).to(0)
model = dispatch_model(model, device_map={"0": 0, "1": "cpu"})  # layer 1: offloaded, executed on cuda:0
hooked = [name for name, m in model.named_modules() if getattr(getattr(m, "_hf_hook", None), "offload", False)]
print("offload hooks on", hooked)  # what a pass exercised: the offloaded INT8 layer
x = torch.randn(2, 64, dtype=torch.float16, device="cuda", requires_grad=True)
model(x).float().sum().backward()
print("input grad on", x.grad.device)
