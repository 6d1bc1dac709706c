# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from final-spec.py: 28 -> 20 code lines.
# Fails with: AttributeError: 'Int8Params' object has no attribute 'SCB'  (in bitsandbytes.nn.modules:Linear8bitLt._save_to_state_dict)
# Guard: passes on the newest set (transformers 5.23.0, accelerate 1.15.0, peft 0.21.2, bitsandbytes 0.50.2)
import os
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig(r=16, lora_alpha=16, target_modules=['o_proj', 'down_proj'], init_lora_weights=False)
cache = None
root = tempfile.mkdtemp()
os.makedirs(root, exist_ok=True)
lock = open(root + '/.build-lock', 'w')
torch.manual_seed(0)
torch.set_default_dtype(torch.bfloat16)
model = Gemma4ForConditionalGeneration(config)
model.save_pretrained(root + '/base')
get_peft_model(model, lora).save_pretrained(root + '/adapter')
del model
torch.set_default_dtype(torch.float32)
quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=True)
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map='sequential', dtype=torch.bfloat16, quantization_config=quant, max_memory={'cpu': '200KB', 0: '200KB'})
