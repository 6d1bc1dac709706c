# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0"]
# ///
"""Family L on two GPUs: Gemma 4 with its (untied) text embedding on cuda:1 and everything else on cuda:0.

A dict device_map, bf16, no quantization, no PEFT; one forward with input_ids on cuda:0 (transformers#45482's
cuda:0/cuda:1 form). `Gemma4Model.forward` builds the multimodal mask from input_ids (cuda:0) and meets the
embedding's output and pad row (cuda:1) in one `torch.where`: the line of family L's single-GPU case, so L's patches
apply. The embedding is untied on purpose: a tied one stays with lm_head on cuda:0 while its hook moves the input
to cuda:1, which fails on every model and every set (a tiny Llama too): a different failure.
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
model = Gemma4ForConditionalGeneration.from_pretrained(path, device_map={"": 0, "model.language_model.embed_tokens": 1})
print("embedding on", model.get_input_embeddings().weight.device, "lm_head on", model.lm_head.weight.device)
print("logits on", model(input_ids=torch.tensor([[2, 3, 4]], device=0)).logits.device)
