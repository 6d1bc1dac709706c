# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.2"]
# ///
# reduced by minrepro from final-spec.py: 28 -> 28 code lines.
# Fails with: RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:<num>, different from other tensors on cuda:<num> (when checking argument in method wrapper_CUDA_mm)  (in peft.tuners.lora.layer:Linear.forward)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
# The search stopped at its time budget (--max-seconds 88.9547): maybe not minimal.
"Scenario explore (rendered by minrepro from a scenario spec): Gemma 4 (4 layers, hidden 64, towers none), bf16, device_map {'': 1, 'model.language_model.layers.1': 0, 'model.language_model.layers.3.mlp': 1, 'model.language_model.embed_tokens_per_layer': 0}, get_peft_model, then generate."

import fcntl
import os
import tempfile
from importlib.metadata import version

import torch
from peft import LoraConfig, get_peft_model
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig(r=16, lora_alpha=16, target_modules='.*language_model.*\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)|.*(vision_tower|audio_tower).*\\.(q_proj|k_proj|v_proj|o_proj)\\.linear', init_lora_weights=False)
cache = os.environ.get('MINREPRO_SCENARIO_CACHE')
saved_by = version('transformers') + '-' + version('peft')
root = os.path.join(cache, '843395767e4d', saved_by) if cache else tempfile.mkdtemp()
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
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 1, 'model.language_model.layers.1': 0, 'model.language_model.layers.3.mlp': 1, 'model.language_model.embed_tokens_per_layer': 0}, dtype=torch.bfloat16, offload_folder=tempfile.mkdtemp())
model = get_peft_model(base, lora)
ids = torch.tensor([[2, 3, 4, 5]], device=0)
print(model.generate(input_ids=ids, max_new_tokens=3, do_sample=False))
