# peft#2501 adapted to a tiny Llama: the reporter's BitsAndBytesConfig (nf4, double quant, bf16 quant storage) and
# LoraConfig (all-linear), merge_adapter() then unmerge_adapter(); on CUDA when there is one (the reporter's device).
import tempfile
import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

path = tempfile.mkdtemp()
LlamaForCausalLM(
    LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
).save_pretrained(path)
quant = BitsAndBytesConfig(
    load_in_4bit=True,
    bnb_4bit_quant_type="nf4",
    bnb_4bit_compute_dtype=torch.bfloat16,
    bnb_4bit_use_double_quant=True,
    bnb_4bit_quant_storage=torch.bfloat16,
)
device = 0 if torch.cuda.is_available() else "cpu"
model = LlamaForCausalLM.from_pretrained(path, quantization_config=quant, dtype=torch.bfloat16, device_map={"": device})
model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False))
ids = torch.tensor([[1, 2, 3]], device=model.device)
with torch.no_grad():
    before = model(input_ids=ids).logits
    model.merge_adapter()
    merged = model(input_ids=ids).logits
    model.unmerge_adapter()
print("merge_adapter ok; max diff merged vs adapter", (merged - before).abs().max().item())
