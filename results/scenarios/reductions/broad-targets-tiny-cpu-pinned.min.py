# Reduced by minrepro from final-spec.py: 13 -> 9 code lines.
# Failure: ValueError: Target module Gemma4ClippableLinear( (linear): Linear(in_features=<num>, out_features=<num>, bias=False) ) is not supported. Currently, only the following modules are supported: `torch.nn.Linear`, `torch.nn.Embedding`, `torch.nn.Conv1d`, `torch.nn.Conv2d`, `torch.nn.Conv3d`, `transformers.pytorch_utils.Conv1D`, `torch.nn.MultiheadAttention.`.  (in peft.tuners.lora.model:LoraModel._create_new_module)
import torch
from peft import LoraConfig, get_peft_model

class Gemma4ClippableLinear(torch.nn.Module):

    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n, bias=False)
model = torch.nn.Sequential()
model.add_module('q_proj', Gemma4ClippableLinear(0))
model = get_peft_model(model, LoraConfig(target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']))
