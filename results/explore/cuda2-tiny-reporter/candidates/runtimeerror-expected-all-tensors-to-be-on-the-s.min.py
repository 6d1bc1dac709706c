# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.14.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from final-spec.py: 29 -> 29 code lines.
# Fails with: RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:<num>, different from other tensors on cuda:<num> (when checking argument in method wrapper_CUDA_mm)  (in bitsandbytes.autograd._functions:MatMul4Bit.forward)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
# The search stopped at its time budget (--max-seconds 93.6996): maybe not minimal.
"Scenario explore (rendered by minrepro from a scenario spec): Gemma 4 (4 layers, hidden 64, towers none), 4-bit, device_map {'': 1, 'model.language_model.layers.3.self_attn': 0, 'model.language_model.layers.0.self_attn.q_proj': 1}, from_pretrained, then generate."

import fcntl
import os
import tempfile
from importlib.metadata import version

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig(r=1, lora_alpha=16, target_modules='.*language_model.*\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)|.*(vision_tower|audio_tower).*\\.(q_proj|k_proj|v_proj|o_proj)\\.linear', init_lora_weights=False)
cache = os.environ.get('MINREPRO_SCENARIO_CACHE')
saved_by = version('transformers') + '-' + version('peft')
root = os.path.join(cache, 'b31427ae61c5', saved_by) if cache else tempfile.mkdtemp()
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
quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=False, bnb_4bit_compute_dtype=torch.float16, llm_int8_enable_fp32_cpu_offload=False)
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 1, 'model.language_model.layers.3.self_attn': 0, 'model.language_model.layers.0.self_attn.q_proj': 1}, dtype=torch.bfloat16, quantization_config=quant)
model = PeftModel.from_pretrained(base, root + '/adapter', offload_dir=tempfile.mkdtemp())
ids = torch.tensor([[2, 3, 4, 5]], device=0)
print(model.generate(input_ids=ids, max_new_tokens=3, do_sample=False))
