# Reduced by minrepro from final-spec.py: 35 -> 17 code lines.
# Failure: AssertionError: merge into <num>-bit diverges from the adapter output: relative error <num>
import tempfile
import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig
config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 8, 'intermediate_size': 1, 'num_hidden_layers': 4, 'num_attention_heads': 1, 'num_key_value_heads': 1, 'head_dim': 1, 'global_head_dim': 2, 'sliding_window': 0, 'hidden_size_per_layer_input': 0, 'vocab_size': 2, 'vocab_size_per_layer_input': 0, 'final_logit_softcapping': 1.0, 'num_kv_shared_layers': 0, 'use_double_wide_mlp': False, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention']}))
lora = LoraConfig(init_lora_weights=False)
root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(config)
model.save_pretrained(root + '/base')
quant = BitsAndBytesConfig()
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', quantization_config=quant)
model = get_peft_model(base, lora)
ids = torch.tensor([[0, 1, 0, 0]], device=base.get_input_embeddings().weight.device)
adapter_out = model(input_ids=ids).logits.float()
merged_out = model.merge_and_unload()(input_ids=ids).logits.float()
error = ((merged_out - adapter_out).norm() / adapter_out.norm()).item()
assert error < 0.05, f'merge into 4-bit diverges from the adapter output: relative error {error:.3f}'
