# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "peft"]
# ///
"""Scenario broad-targets (rendered by minrepro from a scenario spec): toy: a module shaped like Gemma4ClippableLinear targeted by LoRA."""
import torch
from peft import LoraConfig, get_peft_model


class Gemma4ClippableLinear(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n, bias=False)
        self.register_buffer("input_max", torch.tensor(float("inf")))

    def forward(self, x):
        return self.linear(x.clamp(max=self.input_max))


model = torch.nn.Sequential()
model.add_module("q_proj", Gemma4ClippableLinear(16))
model = get_peft_model(model, LoraConfig(target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']))
print(model(torch.randn(2, 16)).shape)
