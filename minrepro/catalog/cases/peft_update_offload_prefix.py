# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "peft==0.19.1", "tokenizers==0.22.2"]
# ///
"""Family R: PeftModel.from_pretrained on a disk-offloaded base looks offloaded weights up under a wrong name.

When the base has modules on disk, `load_adapter` re-saves the offloaded weights under PEFT's names
(`_update_offload`). peft 0.19.1 names each checkpoint key `base_model.model.` + the root container's name (here
`model.`) + the key, which is right only for checkpoints whose keys lack that name: Llama's keys start with
`model.` (`base_model.model.model.model.…`) and `lm_head.weight` never has it (`base_model.model.model.lm_head`),
so the module lookup raises KeyError. Found by `minrepro explore` (Gemma 4, any disk layer in the base map). peft
0.21.0 tries the name with and without the container (huggingface/peft#3468).
"""
import os
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

os.chdir(tempfile.mkdtemp())  # PEFT writes its renamed offload file under the working directory
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained("base")
lora = get_peft_model(LlamaForCausalLM.from_pretrained("base"), LoraConfig(target_modules=["q_proj"], init_lora_weights=False))
lora.save_pretrained("adapter")
ids = torch.tensor([[1, 2, 3]])
reference = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained("base"), "adapter")(input_ids=ids).logits
placement = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
             "model.rotary_emb": "cpu", "lm_head": "cpu"}
base = LlamaForCausalLM.from_pretrained("base", device_map=placement, offload_folder="offload")
# PEFT's redispatch budget: about half the model, so that its map keeps layer 1 on disk too
model = PeftModel.from_pretrained(base, "adapter", max_memory={"cpu": "60KB"}, offload_folder="offload")
offloaded = model.base_model.model.model.layers[1].self_attn.q_proj.lora_A["default"].weight.device
assert offloaded.type == "meta", f"not the branch in question: layer 1's adapter is on {offloaded}, not offloaded"
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("adapter on a base with layer 1 on disk: layer 1 stays offloaded; logits match a one-device load")
