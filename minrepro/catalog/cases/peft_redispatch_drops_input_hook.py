# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "peft==0.19.1"]
# ///
"""Family AB: PEFT's redispatch to one device drops the hook that moved the inputs there.

A base loaded with a split map (cuda:0 and a cpu entry) gets accelerate's root hook: it moves the inputs to cuda:0,
so a forward with input_ids on cpu works. `PeftModel.from_pretrained` redispatches (the map has a cpu entry); under
a budget where everything fits cuda:0, `dispatch_model` just moves the model (no hooks), then `load_adapter` puts
`AlignDevicesHook(io_same_device=True)` on the base, with no execution device: nothing moves the inputs any more.
Explore's two-GPU row `index is on cuda:0` (Gemma 4 on cuda:1, the ids on cuda:0) is this, on a second GPU.

Expected: the inputs the base alone accepted still work after the adapter is loaded (logits on cpu, as without it).
"""
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1)
root = tempfile.mkdtemp()
torch.manual_seed(0)
LlamaForCausalLM(config).save_pretrained(root + "/base")
lora = LoraConfig(target_modules=["q_proj"], init_lora_weights=False)
get_peft_model(LlamaForCausalLM(config), lora).save_pretrained(root + "/adapter")
base = LlamaForCausalLM.from_pretrained(root + "/base", device_map={"": 0, "lm_head": "cpu"})
ids = torch.tensor([[1, 2, 3]])  # on cpu, as a tokenizer returns them: the base's root hook moves them
print("base alone: logits on", base(input_ids=ids).logits.device)
model = PeftModel.from_pretrained(base, root + "/adapter", max_memory={0: "1GiB", "cpu": "1GiB"})
print("PEFT's map:", model.hf_device_map)
print("with the adapter: logits on", model(input_ids=ids).logits.device)
