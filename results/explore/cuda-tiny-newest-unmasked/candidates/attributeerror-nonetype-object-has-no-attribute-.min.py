# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from final-spec.py: 28 -> 22 code lines.
# Fails with: AttributeError: 'NoneType' object has no attribute 'to'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import os
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}), vision_config=Gemma4VisionConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 2, 'head_dim': 32, 'use_clipped_linears': False}))
lora = LoraConfig(r=8, lora_alpha=16, target_modules=['q_proj', 'v_proj'], init_lora_weights=False)
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
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 0, 'model.language_model.layers.3': 'disk'}, dtype=torch.bfloat16, quantization_config=quant)
model = PeftModel.from_pretrained(base, root + '/adapter', max_memory={'cpu': '3MB', 0: '1MB'})
model = model.merge_and_unload()
