# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# Reduced by minrepro from final-spec.py: 26 -> 12 code lines.
# Failure: KeyError: <num>  (in transformers.models.gemma4.modeling_gemma4:Gemma4TextAttention.forward)
import tempfile
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig
config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'intermediate_size': 0, 'num_hidden_layers': 4, 'num_attention_heads': 0, 'num_key_value_heads': 1, 'head_dim': 1, 'global_head_dim': 1, 'sliding_window': 1, 'hidden_size_per_layer_input': 0, 'vocab_size': 4, 'vocab_size_per_layer_input': 0, 'final_logit_softcapping': 0.0, 'num_kv_shared_layers': 1, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig()
root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(config)
model.save_pretrained(root + '/base')
get_peft_model(model, lora).save_pretrained(root + '/adapter')
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 'cpu', 'lm_head': 'disk'})
model = PeftModel.from_pretrained(base, root + '/adapter', device_map={'': 'cpu', 'base_model.model.lm_head': 'disk'}, offload_dir=tempfile.mkdtemp())
model.generate()
