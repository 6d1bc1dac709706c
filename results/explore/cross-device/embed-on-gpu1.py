# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers", "peft", "accelerate"]
# ///
"""Scenario cross-device-embed (rendered by minrepro from a scenario spec): Gemma 4 (4 layers, hidden 64, towers vision, audio), bf16, device_map {'': 0, 'model.language_model.embed_tokens': 1}, from_pretrained, then forward."""
import fcntl
import os
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 4, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 64, 'global_head_dim': 64, 'sliding_window': 512, 'hidden_size_per_layer_input': 64, 'vocab_size': 128, 'vocab_size_per_layer_input': 128, 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 2, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}), vision_config=Gemma4VisionConfig(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 2, 'head_dim': 32, 'use_clipped_linears': False}), audio_config=Gemma4AudioConfig(**{'hidden_size': 64, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'use_clipped_linears': True, 'output_proj_dims': 64}))
lora = LoraConfig(r=8, lora_alpha=16, target_modules='.*language_model.*\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)|.*(vision_tower|audio_tower).*\\.(q_proj|k_proj|v_proj|o_proj)\\.linear', init_lora_weights=False)
cache = os.environ.get('MINREPRO_SCENARIO_CACHE')  # reuse a checkpoint built for the same model
root = os.path.join(cache, '5cbf62547cc7') if cache else tempfile.mkdtemp()
os.makedirs(root, exist_ok=True)
with open(root + "/.build-lock", "w") as lock:  # concurrent runs build a shared checkpoint once
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.exists(root + "/adapter/adapter_config.json"):
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)  # random weights, saved as the checkpoints are
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):  # an E2B init on CPU takes minutes
            model = Gemma4ForConditionalGeneration(config)
        model.save_pretrained(root + "/base")
        get_peft_model(model, lora).save_pretrained(root + "/adapter")
        del model
        torch.set_default_dtype(torch.float32)
base = Gemma4ForConditionalGeneration.from_pretrained(root + "/base", device_map={'': 0, 'model.language_model.embed_tokens': 1}, dtype=torch.bfloat16)
model = PeftModel.from_pretrained(base, root + "/adapter")
ids = torch.tensor([[2, 3, 4, 5]], device=0)
print(model(input_ids=ids).logits.shape)
