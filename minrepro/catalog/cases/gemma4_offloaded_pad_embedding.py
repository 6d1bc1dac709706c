# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "tokenizers==0.22.2"]
# ///
"""Family K: Gemma 4 reads `embed_tokens.weight` outside the embedding's forward, so an offloaded embedding breaks it.

`Gemma4Model.forward` takes the pad row of `embed_tokens.weight` for the per-layer inputs. With `embed_tokens`
on disk (what PEFT's redispatch infers on a short memory budget: the seeds' consumer box, tiny scale here), accelerate keeps
that weight on meta outside the module's own forward, and `torch.where` fails. No quantization or adapter is
involved; text-only input, so the pad row is not even used.
"""
import tempfile

import torch
from accelerate import dispatch_model
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=16,
                        vocab_size=128, vocab_size_per_layer_input=128, num_kv_shared_layers=0,
                        layer_types=["sliding_attention", "full_attention"])
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=None, audio_config=None)).eval()
ids = torch.tensor([[2, 3, 4, 5]])
with torch.no_grad():
    expected = model(input_ids=ids).logits
    device_map = {f"model.language_model.{name}": "cpu" for name, _ in model.model.language_model.named_children()}
    device_map |= {"model.language_model.embed_tokens": "disk", "lm_head": "cpu"}
    dispatch_model(model, device_map, offload_dir=tempfile.mkdtemp())
    out = model(input_ids=ids).logits
assert torch.allclose(out, expected), f"offloaded output differs: max error {(out - expected).abs().max():.3g}"
print("output matches the reference")
