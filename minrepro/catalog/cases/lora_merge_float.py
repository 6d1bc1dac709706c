# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "peft==0.19.1", "tokenizers==0.22.2"]
# ///
"""Control (passes on every set): merging a LoRA adapter into a float model, in memory.

The merge path the 4-bit merge patches change (the delta weight, the merged forward), without quantization: the
merged model's logits equal the adapter's. A patch that makes this fail is harm.
"""
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
lora = LoraConfig(target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
model = get_peft_model(LlamaForCausalLM(config), lora).eval()
ids = torch.tensor([[1, 2, 3]])
with torch.no_grad():
    adapted = model(input_ids=ids).logits
    model.merge_adapter()
    merged = model(input_ids=ids).logits
    model.unmerge_adapter()
    unmerged = model(input_ids=ids).logits
    final = model.merge_and_unload()(input_ids=ids).logits
for logits in (merged, unmerged, final):
    torch.testing.assert_close(logits, adapted, rtol=1e-4, atol=1e-5)
print("merge_adapter, unmerge_adapter and merge_and_unload keep the adapter's logits")
