# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "tokenizers==0.22.2", "peft==0.19.1"]
# ///
"""Family D: a LoRA target that names a `Gemma4ClippableLinear` (vision/audio towers).

`Gemma4ClippableLinear` is an `nn.Module` holding the real layer at `.linear` plus optional clamp
buffers; PEFT's LoRA dispatch does not know it. Broad-target adapters (`q_proj`) therefore fail to load;
targeting `q_proj.linear` works. The audio tower uses clipped linears.
"""
import torch
from peft import LoraConfig, get_peft_model
from transformers import Gemma4AudioConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4ClippableLinear


class Tower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = Gemma4ClippableLinear(Gemma4AudioConfig(), 16, 16)


tower, x = Tower(), torch.randn(2, 16)
before = tower.q_proj(x)
model = get_peft_model(tower, LoraConfig(target_modules=["q_proj"], init_lora_weights=False))
assert not torch.allclose(model.base_model.model.q_proj(x), before), "the adapter does not change the output"
print("adapter attached and active")
