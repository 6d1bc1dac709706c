# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.23.0", "accelerate==1.15.0", "peft==0.21.2", "tokenizers==0.22.2"]
# ///
"""Family V: PEFT's redispatch loses a tied weight on disk (the lm_head that shares the embeddings).

`load_adapter` rebuilds the offload index from `named_module_tensors(model)`, which names a tied tensor once (as
the embeddings'), and `_update_offload` rewrites only the checkpoint's own keys, where a tied head has none. So the
head's new index entry points at a key no file holds, and the first forward fails in accelerate's offload loader.
Found behind every other patch: a Gemma 4 eval script (lm_head on disk, embeddings on cpu) failed there with
`KeyError: 'base_model.model.lm_head.weight'`; with both on disk, as here, newest fails unpatched.
"""
import os
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

os.chdir(tempfile.mkdtemp())
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
model = LlamaForCausalLM(config)
model.save_pretrained("base")
get_peft_model(model, LoraConfig(target_modules=["q_proj"], init_lora_weights=False)).save_pretrained("adapter")
ids = torch.tensor([[1, 2, 3]])
reference = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained("base"), "adapter")(input_ids=ids).logits
placement = {"model.embed_tokens": "disk", "model.layers": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu",
             "lm_head": "disk"}
base = LlamaForCausalLM.from_pretrained("base", device_map=placement, offload_folder="offload")
peft_map = {f"base_model.model.{name}": device for name, device in placement.items()}
model = PeftModel.from_pretrained(base, "adapter", offload_dir="offload-peft", device_map=peft_map)
hook = getattr(model.base_model.model.lm_head, "_hf_hook", None)
assert hook is not None and hook.offload, "not the branch in question: lm_head has no offloading hook"
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("tied lm_head and embeddings on disk under PEFT: logits match a one-device load")
