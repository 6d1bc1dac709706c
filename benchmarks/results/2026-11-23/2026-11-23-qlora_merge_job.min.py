# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from qlora_merge_job.py: 94 -> 13 code lines.
# Fails with: AttributeError: 'Parameter' object has no attribute 'quant_state'  (in peft.tuners.lora.bnb:Linear4bit.merge)
# Guard: passes under /root/.cache/minrepro/envs/pinned-patched/bin/python
import os

from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

config = LlamaConfig(hidden_size=32)
model = LlamaForCausalLM(config)
path = os.path.join('base')
model.save_pretrained(path)
quant = BitsAndBytesConfig(bnb_4bit_quant_type='nf4')
base = LlamaForCausalLM.from_pretrained(path, quantization_config=quant)
lora = LoraConfig()
model = get_peft_model(base, lora)
model.dequantize()
merged = model.merge_and_unload()
