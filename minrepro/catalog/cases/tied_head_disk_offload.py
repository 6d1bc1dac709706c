# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "tokenizers==0.22.2"]
# ///
"""Family S: a tied lm_head mapped to disk while its embedding stays in memory fails at the first forward.

With tied embeddings the checkpoint holds `model.embed_tokens.weight` only. transformers builds the disk offload
index from the checkpoint's keys, and adds a tied weight only when its source is on disk too; here the source is on
the cpu, so `lm_head.weight` is in no index and the head's offload hook raises `KeyError: 'lm_head.weight'` when it
loads the weight. Gemma 4 ties a 262k-row head, the first thing a squeezed map sends to disk. Found by `minrepro
explore` (Gemma 4, pinned and newest, with family O's patch); a tiny Llama without quantization or PEFT fails alike.
"""
import os
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

os.chdir(tempfile.mkdtemp())
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
LlamaForCausalLM(config).save_pretrained("base")
ids = torch.tensor([[1, 2, 3]])
reference = LlamaForCausalLM.from_pretrained("base")(input_ids=ids).logits
placement = {"model.embed_tokens": "cpu", "model.layers": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu",
             "lm_head": "disk"}
model = LlamaForCausalLM.from_pretrained("base", device_map=placement, offload_folder="offload")
hook = getattr(model.lm_head, "_hf_hook", None)
assert hook is not None and hook.offload, "not the branch in question: lm_head has no offloading hook"
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("tied lm_head on disk, embedding on cpu: logits match a one-device load")
