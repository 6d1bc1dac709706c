# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0"]
# ///
"""Candidate family (not catalogued: not yet run): Gemma 4's per-layer inputs meet their projection on another GPU.

Explore's newest `mat2 is on cuda:1` row, run with every catalog patch (AC's among them) on two H200s, got past its
first failure and stopped in transformers' `Gemma4TextModel.project_per_layer_inputs` on every set:
`per_layer_projection + per_layer_inputs` with the projection on cuda:1 and the per-layer inputs on cuda:0. The
per-layer inputs come from `embed_tokens_per_layer`, called from `Gemma4Model.forward` outside any block that moves
its output; transformers#45823 ("Gemma4 PLE device mismatch with device_map=auto") was closed by #45826, which moved
the multimodal mask only. Here the per-layer embedding alone is on cuda:1. Needs two GPUs.

Expected: logits on cuda:0; a fix would move `per_layer_inputs` to the projection's device before the sum.
"""
import tempfile

import torch
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=16,
                        vocab_size=128, vocab_size_per_layer_input=128, num_kv_shared_layers=0,
                        layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=False)
path = tempfile.mkdtemp()
config = Gemma4Config(text_config=text, vision_config=None, audio_config=None, tie_word_embeddings=False)
Gemma4ForConditionalGeneration(config).save_pretrained(path)
model = Gemma4ForConditionalGeneration.from_pretrained(
    path, device_map={"": 0, "model.language_model.embed_tokens_per_layer": 1})
print("per-layer embedding on", model.model.language_model.embed_tokens_per_layer.weight.device)
print("logits on", model(input_ids=torch.tensor([[2, 3, 4]], device=0)).logits.device)
