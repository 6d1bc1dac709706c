# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "tokenizers==0.22.2"]
# ///
"""Control (passes on every set): an untied model with a block and its head on disk, loaded by transformers.

The plain disk-offload path that the accelerate and transformers offload patches change (root entries, tied heads,
shared weight maps): nothing tied, no quantization, no PEFT. A patch that makes this fail is harm.
"""
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

path, offload = tempfile.mkdtemp(), tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
LlamaForCausalLM(config).save_pretrained(path)
ids = torch.tensor([[1, 2, 3]])
reference = LlamaForCausalLM.from_pretrained(path)(input_ids=ids).logits
placement = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
             "model.rotary_emb": "cpu", "lm_head": "disk"}
model = LlamaForCausalLM.from_pretrained(path, device_map=placement, offload_folder=offload)
assert model.lm_head._hf_hook.offload and model.model.layers[1].self_attn.q_proj.weight.device.type == "meta"
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("a block and the head on disk: logits match a one-device load")
