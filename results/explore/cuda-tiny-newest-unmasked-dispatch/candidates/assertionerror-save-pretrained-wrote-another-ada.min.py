# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from final-spec.py: 38 -> 22 code lines.
# Fails with: AssertionError: save_pretrained wrote another adapter: <num> tensors differ
# Guard: unguarded: no environment where the bug is fixed, and no library call to cut
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

lora = LoraConfig(r=1, lora_alpha=16, target_modules=['o_proj', 'down_proj'], init_lora_weights=False)
root = tempfile.mkdtemp()
torch.manual_seed(0)
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']})))
model.save_pretrained(root + '/base')
get_peft_model(model, lora).save_pretrained(root + '/adapter')

import hashlib, pathlib

digest = lambda: {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(pathlib.Path(root).rglob('*')) if p.is_file() and p.name != '.build-lock'}
files_before = digest()
model = get_peft_model(Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 0}, dtype=None), lora)

from safetensors.torch import load_file

saved = tempfile.mkdtemp()
model.save_pretrained(saved)
before, after = (load_file(d + '/adapter_model.safetensors') for d in (root + '/adapter', saved))
differ = sorted((k for k in before if k not in after or not torch.equal(before[k], after[k].to(before[k].device))))
assert not differ, f'save_pretrained wrote another adapter: {len(differ)} tensors differ'
changed = sorted((p.name for p, h in digest().items() if 1(p) != h))
assert not changed, f'from_pretrained rewrote the base checkpoint: {changed}'
