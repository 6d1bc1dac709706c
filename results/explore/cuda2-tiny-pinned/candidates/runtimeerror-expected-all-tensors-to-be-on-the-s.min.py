# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from final-spec.py: 34 -> 34 code lines.
# Fails with: RuntimeError: Expected all tensors to be on the same device, but got index is on cuda:<num>, different from other tensors on cuda:<num> (when checking argument in method wrapper_CUDA__index_select)  (in transformers.models.gemma4.modeling_gemma4:Gemma4TextScaledWordEmbedding.forward)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
# The search stopped at its time budget (--max-seconds 94.3448): maybe not minimal.
"Scenario explore (rendered by minrepro from a scenario spec): Gemma 4 (4 layers, hidden 64, towers audio), bf16, device_map {'': 1, 'model.language_model.layers.3.mlp.down_proj': 'cpu'}, from_pretrained, then forward."

import fcntl
import os
import tempfile
from importlib.metadata import version

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}), audio_config=Gemma4AudioConfig(**{'hidden_size': 64, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'use_clipped_linears': True, 'output_proj_dims': 64}))
lora = LoraConfig(r=8, lora_alpha=16, target_modules=['o_proj', 'down_proj'], init_lora_weights=False)
cache = os.environ.get('MINREPRO_SCENARIO_CACHE')
saved_by = version('transformers') + '-' + version('peft')
root = os.path.join(cache, '048fd67e6ce7', saved_by) if cache else tempfile.mkdtemp()
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

import hashlib, pathlib

digest = lambda: {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(pathlib.Path(root).rglob('*')) if p.is_file() and p.name != '.build-lock'}
files_before = digest()
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 1, 'model.language_model.layers.3.mlp.down_proj': 'cpu'}, dtype=torch.bfloat16)
model = PeftModel.from_pretrained(base, root + '/adapter', max_memory={0: '200KB', 1: '3MB', 'cpu': '1MB'})
ids = torch.tensor([[2, 3, 4, 5]], device=0)
print(model(input_ids=ids).logits.shape)
changed = sorted((p.name for p, h in digest().items() if files_before.get(p) != h))
assert not changed, f'PeftModel.from_pretrained rewrote the base checkpoint: {changed}'
print('checkpoint files unchanged')
