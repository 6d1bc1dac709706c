# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.23.0", "accelerate==1.15.0", "peft==0.21.2", "tokenizers==0.22.2"]
# ///
"""Family Q: a LoRA adapter on a base with a layer offloaded to disk: PeftModel.from_pretrained moves it with .to().

PEFT's `load_adapter` redispatches whenever the base's map has cpu or disk entries, with a map it infers from
free memory. Here everything fits one device, so `dispatch_model` takes its one-device branch, `model.to(...)`, and
the base's disk layer is meta placeholders: `Cannot copy out of meta tensor`. R03's "PEFT moves the whole model"
trap, met by an offloaded base. Found by `minrepro explore` on newest with the masking families patched.
"""
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

root = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained(root + "/base")
lora = get_peft_model(LlamaForCausalLM.from_pretrained(root + "/base"), LoraConfig(target_modules=["q_proj"], init_lora_weights=False))
lora.save_pretrained(root + "/adapter")
ids = torch.tensor([[1, 2, 3]])
reference = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(root + "/base"), root + "/adapter")(input_ids=ids).logits
placement = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
             "model.rotary_emb": "cpu", "lm_head": "cpu"}
base = LlamaForCausalLM.from_pretrained(root + "/base", device_map=placement, offload_folder=root + "/base-offload")
model = PeftModel.from_pretrained(base, root + "/adapter")
offloaded = model.base_model.model.model.layers[1].self_attn.q_proj.lora_A["default"].weight.device
assert offloaded.type == "meta", f"not the branch in question: layer 1's adapter is on {offloaded}, not offloaded"
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("adapter on a base with layer 1 on disk: layer 1 stays offloaded; logits match the one-device load")
