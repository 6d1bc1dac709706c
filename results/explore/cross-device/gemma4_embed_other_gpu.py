# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0"]
# ///
"""Gemma 4 with its text embedding on cuda:1 and the rest on cuda:0 (a dict device_map, no PEFT, bf16):
a forward with input_ids on cuda:0 (the main device) fails in Gemma4TextScaledWordEmbedding."""
import tempfile

import torch
from transformers import Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4Config

text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=16,
                        vocab_size=128, vocab_size_per_layer_input=128, num_kv_shared_layers=0,
                        layer_types=["sliding_attention", "full_attention"])
path = tempfile.mkdtemp()
Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=None, audio_config=None)).save_pretrained(path)
model = Gemma4ForConditionalGeneration.from_pretrained(path, device_map={"": 0, "model.language_model.embed_tokens": 1})
print(model(input_ids=torch.tensor([[2, 3, 4]], device=0)).logits.device)
