# Reduced by minrepro from final-spec.py: 29 -> 13 code lines.
# Failure: AttributeError: 'Parameter' object has no attribute 'quant_state'  (in peft.tuners.lora.bnb:Linear4bit.merge)
import tempfile
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig
config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 0, 'intermediate_size': 0, 'num_hidden_layers': 4, 'num_attention_heads': 0, 'num_key_value_heads': 1, 'head_dim': 1, 'global_head_dim': 1, 'sliding_window': 0, 'hidden_size_per_layer_input': 0, 'vocab_size': 1, 'vocab_size_per_layer_input': 0, 'final_logit_softcapping': 0.0, 'num_kv_shared_layers': 0, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig()
root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(config)
model.save_pretrained(root + '/base')
quant = BitsAndBytesConfig()
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', quantization_config=quant)
model = get_peft_model(base, lora)
model.dequantize()
model = model.merge_and_unload()
