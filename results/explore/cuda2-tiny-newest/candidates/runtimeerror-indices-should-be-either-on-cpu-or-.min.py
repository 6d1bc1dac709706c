# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from final-spec.py: 48 -> 48 code lines.
# Fails with: RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cuda:<num>)  (in bitsandbytes.backends.default.ops:_)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
"Scenario explore (rendered by minrepro from a scenario spec): Gemma 4 (4 layers, hidden 64, towers vision), 4-bit, device_map {'': 0, 'model.language_model.layers.0': 1, 'model.language_model.layers.2.self_attn.q_proj': 'cpu'}, from_pretrained, then placement."

import fcntl
import os
import tempfile
from importlib.metadata import version

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}), vision_config=Gemma4VisionConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 2, 'head_dim': 32, 'use_clipped_linears': False}))
lora = LoraConfig(r=1, lora_alpha=16, target_modules='.*language_model.*\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)|.*(vision_tower|audio_tower).*\\.(q_proj|k_proj|v_proj|o_proj)\\.linear', init_lora_weights=False)
cache = os.environ.get('MINREPRO_SCENARIO_CACHE')
saved_by = version('transformers') + '-' + version('peft')
root = os.path.join(cache, 'b0b5add7c425', saved_by) if cache else tempfile.mkdtemp()
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
quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=True)
ids = torch.tensor([[2, 3, 4, 5]], device=0)
reference = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 0}, dtype=torch.bfloat16, quantization_config=quant)
reference = PeftModel.from_pretrained(reference, root + '/adapter')
quantized = lambda m: sum((type(x).__name__ in ('Linear4bit', 'Linear8bitLt') for x in m.modules()))
with torch.no_grad():
    expected, expected_quantized = (reference(input_ids=ids).logits.float().cpu(), quantized(reference))
del reference

import hashlib, pathlib

digest = lambda: {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(pathlib.Path(root).rglob('*')) if p.is_file() and p.name != '.build-lock'}
files_before = digest()
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 0, 'model.language_model.layers.0': 1, 'model.language_model.layers.2.self_attn.q_proj': 'cpu'}, dtype=torch.bfloat16, quantization_config=quant, offload_folder=tempfile.mkdtemp())
model = PeftModel.from_pretrained(base, root + '/adapter', max_memory={1: '200KB', 'cpu': '8MB', 0: '8MB'}, offload_dir=tempfile.mkdtemp())
with torch.no_grad():
    out = model(input_ids=ids).logits
assert out.device == ids.device, f'logits on {out.device.type}, input on {ids.device.type}'
if quantized(model) == expected_quantized:
    error = ((out.float().cpu() - expected).norm() / expected.norm()).item()
    assert error < 0.055299, f'placement changes the logits: relative error {error:.3f}'
    print(f'placement keeps the logits: relative error {error:.6f}')
print('quantized layers: split', quantized(model), 'one device', expected_quantized)
changed = sorted((p.name for p, h in digest().items() if files_before.get(p) != h))
assert not changed, f'PeftModel.from_pretrained rewrote the base checkpoint: {changed}'
print('checkpoint files unchanged')
