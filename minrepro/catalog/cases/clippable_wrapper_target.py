# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "peft==0.19.1"]
# ///
"""Family D, toy: a wrapper shaped like `Gemma4ClippableLinear` (real layer at `.linear`, clamp buffers).

Any such wrapper is rejected by PEFT's LoRA dispatch when a target names the wrapper, not its `.linear`.
"""
import torch
from peft import LoraConfig, get_peft_model


class ClippableLinear(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n, bias=False)
        self.register_buffer("input_min", torch.tensor(-float("inf")))
        self.register_buffer("input_max", torch.tensor(float("inf")))

    def forward(self, x):
        return self.linear(x.clamp(self.input_min, self.input_max))


model, x = torch.nn.Sequential(), torch.randn(2, 16)
model.add_module("q_proj", ClippableLinear(16))
before = model(x)
model = get_peft_model(model, LoraConfig(target_modules=["q_proj"], init_lora_weights=False))
assert not torch.allclose(model(x), before), "the adapter is attached but does not change the output"
print("adapter attached and active")
