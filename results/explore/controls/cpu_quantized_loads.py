"""Control for family A's page (docs/families/quant-state-meta-item.md, on a CPU-only box): which CPU loads transformers quantizes to
4-bit, and whether PEFT's from_pretrained then redispatches. Usage: python cpu_quantized_loads.py [DEVICE_MAP]
(default "cpu"; a dict is given as Python text). Outputs on this repo's CPU box: cpu_quantized_loads.txt."""
import os, sys, tempfile
import torch, bitsandbytes as bnb
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM, BitsAndBytesConfig
os.chdir(tempfile.mkdtemp())
config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained("base")
get_peft_model(LlamaForCausalLM.from_pretrained("base"), LoraConfig(target_modules=["q_proj"])).save_pretrained("adapter")
q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True, llm_int8_enable_fp32_cpu_offload=True)
dm = sys.argv[1] if len(sys.argv) > 1 else "cpu"
base = LlamaForCausalLM.from_pretrained("base", quantization_config=q, device_map=eval(dm) if dm.startswith("{") else dm, offload_folder="off")
print("hf map", getattr(base, "hf_device_map", None))
print("4bit modules", sum(isinstance(m, bnb.nn.Linear4bit) for m in base.modules()), "params4bit", sum(type(p).__name__ == "Params4bit" for p in base.parameters()))
model = PeftModel.from_pretrained(base, "adapter", max_memory={"cpu": "100KB"}, offload_folder="off2")
print("peft map", model.hf_device_map if hasattr(model, "hf_device_map") else None)
print(model(input_ids=torch.tensor([[1, 2, 3]])).logits.shape)
