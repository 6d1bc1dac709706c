# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from final-spec.py: 35 -> 35 code lines.
# Fails with: TypeError: Int8Params.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
"Scenario explore (rendered by minrepro from a scenario spec): Gemma 4 (4 layers, hidden 64, towers none), 4-bit, device_map 'cpu', dispatch_model, then forward."

import fcntl
import os
import tempfile

import torch
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig(r=8, lora_alpha=16, target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], init_lora_weights=False)
cache = os.environ.get('MINREPRO_SCENARIO_CACHE')
root = os.path.join(cache, '345f44300cfc') if cache else tempfile.mkdtemp()
os.makedirs(root, exist_ok=True)
with open(root + '/.build-lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.exists(root + '/adapter/adapter_config.json'):
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device('cuda' if torch.cuda.is_available() else 'cpu'):
            model = Gemma4ForConditionalGeneration(config)
        model.save_pretrained(root + '/base')
        get_peft_model(model, lora).save_pretrained(root + '/adapter')
        del model
        torch.set_default_dtype(torch.float32)
quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=False)

import hashlib, pathlib

digest = lambda: {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(pathlib.Path(root).rglob('*')) if p.is_file() and p.name != '.build-lock'}
files_before = digest()
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map='cpu', dtype=torch.bfloat16, quantization_config=quant)
model = get_peft_model(base, lora)
dispatch_model(model, device_map={'': 'cpu', 'base_model.model.model.language_model.layers.1.mlp': 'disk', 'base_model.model.model.language_model.layers.3.self_attn': 'cpu'}, offload_dir=tempfile.mkdtemp())
ids = torch.tensor([[2, 3, 4, 5]], device='cpu')
print(model(input_ids=ids).logits.shape)
changed = sorted((p.name for p, h in digest().items() if files_before.get(p) != h))
assert not changed, f'from_pretrained rewrote the base checkpoint: {changed}'
print('checkpoint files unchanged')
