# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.23.0", "accelerate==1.15.0", "peft==0.21.2", "tokenizers==0.22.2"]
# ///
"""Family P: `PeftModel.save_pretrained` of an adapter whose layer is offloaded to disk writes nothing.

The adapter loads and runs: PEFT's redispatch keeps the offloaded layer's LoRA weights in accelerate's weights map
and the hooks bring them in for each forward. But `save_pretrained` reads `state_dict()`, where they are meta
placeholders, and safetensors fails with `Cannot copy out of meta tensor`. Found by `minrepro explore` (a
save_load action, two GPUs); a tiny Llama on the CPU with one layer on disk shows it is not Gemma 4's.
"""
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.utils import load_peft_weights
from transformers import LlamaConfig, LlamaForCausalLM

root = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained(root + "/base")
lora = get_peft_model(LlamaForCausalLM.from_pretrained(root + "/base"), LoraConfig(target_modules=["q_proj"], init_lora_weights=False))
lora.save_pretrained(root + "/adapter")
placement = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
             "model.rotary_emb": "cpu", "lm_head": "cpu"}
base = LlamaForCausalLM.from_pretrained(root + "/base", device_map=placement, offload_folder=root + "/base-offload")
model = PeftModel.from_pretrained(base, root + "/adapter", offload_dir=root + "/offload",
                                  device_map={f"base_model.model.{k}": v for k, v in placement.items()})
offloaded = model.base_model.model.model.layers[1].self_attn.q_proj.lora_A["default"].weight.device
assert offloaded.type == "meta", f"not the branch in question: layer 1's adapter is on {offloaded}, not offloaded"
model.save_pretrained(root + "/saved")
saved, original = load_peft_weights(root + "/saved"), load_peft_weights(root + "/adapter")
assert saved.keys() == original.keys() and all(torch.equal(saved[k], original[k]) for k in saved)
print(f"saved the offloaded adapter: {len(saved)} tensors, equal to the ones loaded")
