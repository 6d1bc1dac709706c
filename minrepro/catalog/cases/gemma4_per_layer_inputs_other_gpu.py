# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0"]
# ///
"""Family AF: Gemma 4's per-layer inputs meet their projection on another GPU (transformers).

`Gemma4TextModel.project_per_layer_inputs` adds `per_layer_inputs`, which come from `embed_tokens_per_layer`, to
the projection of the input embeddings. Under a device_map over several GPUs the per-layer embedding can be on
another GPU than `per_layer_model_projection` (at E4B it holds 262144 x 42 x 256 = 2.8B parameters, so a map over
two GPUs can well put it apart from the projection; not measured at E4B). With a map that names modules, as "auto" writes it, the text model has no hook of its own that would move
its inputs (a root entry "" gives it one, and the sum then passes), so the sum meets two devices. Found past family AC in
explore's newest `mat2 is on cuda:1` row, with every catalog patch, on two H200s. transformers#45823 ("Gemma4 PLE
device mismatch with device_map=auto") was closed by #45826, which moved the multimodal mask only.

Expected: the split model's logits equal a one-GPU load's.
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
model = Gemma4ForConditionalGeneration(config)
model.save_pretrained(path)
# a map that names modules, as "auto" writes it (no root entry): the text model itself gets no hook
device_map = {f"model.{name}": 0 for name, _ in model.model.named_children() if name != "language_model"}
device_map |= {f"model.language_model.{name}": 0 for name, _ in model.model.language_model.named_children()}
device_map |= {"lm_head": 0, "model.language_model.embed_tokens_per_layer": 1}
ids = torch.tensor([[2, 3, 4]], device=0)
reference = Gemma4ForConditionalGeneration.from_pretrained(path, device_map={"": 0})(input_ids=ids).logits
model = Gemma4ForConditionalGeneration.from_pretrained(path, device_map=device_map)
print("per-layer embedding on", model.model.language_model.embed_tokens_per_layer.weight.device)
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("logits equal a one-GPU load's")
