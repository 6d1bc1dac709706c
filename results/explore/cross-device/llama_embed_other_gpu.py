"""Control for gemma4_embed_other_gpu.py: the same split on a tiny Llama (model.embed_tokens on cuda:1).

Not like for like: Llama's embeddings are untied by default, Gemma 4's tied. embed_tied_untied_controls.py
compares both ways; the tied split fails on Llama too."""
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

path = tempfile.mkdtemp()
LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, vocab_size=128)).save_pretrained(path)
model = LlamaForCausalLM.from_pretrained(path, device_map={"": 0, "model.embed_tokens": 1})
print(model(input_ids=torch.tensor([[2, 3, 4]], device=0)).logits.device)
