# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "tokenizers==0.22.2", "peft==0.19.1", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family G, 8-bit: `peft_model.dequantize()` then `merge_and_unload()` on an INT8 model.

transformers' `dequantize` swaps each `Linear8bitLt` (including PEFT's `base_layer`) for an `nn.Linear`, but
the PEFT wrapper is still the bnb LoRA layer, whose `merge` reads `base_layer.state`. Found by `minrepro
explore` on two GPUs (INT8 with fp32 cpu offload, dequantize then merge); it needs neither GPU nor offload.
"""
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

path = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained(path)
base = LlamaForCausalLM.from_pretrained(path, quantization_config=BitsAndBytesConfig(load_in_8bit=True), device_map="cpu")
model = get_peft_model(base, LoraConfig(target_modules=["q_proj"], init_lora_weights=False))
model.dequantize()
ids = torch.tensor([[1, 2, 3]])
expected = model(ids).logits  # the dequantized model with the adapter, before merging
out = model.merge_and_unload()(ids).logits
assert torch.allclose(out, expected, atol=1e-4), f"merged output differs: max error {(out - expected).abs().max():.4f}"
print("merged output matches the adapter's")
