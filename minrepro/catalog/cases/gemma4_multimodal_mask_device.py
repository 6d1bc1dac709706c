# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "tokenizers==0.22.2"]
# ///
"""Family L: Gemma 4 (transformers 5.6.2) mixes the inputs' device with the embeddings' device.

When PEFT's redispatch infers a map with no GPU entry (a short budget: the seeds' consumer box), the whole model
executes on the cpu while the user's inputs stay on cuda:0. PEFT dispatches its wrapper, whose top-level hook would
move inputs to the cpu, but `generate` calls the base model directly, past that hook. `Gemma4Model.forward` then
builds the multimodal mask from `input_ids` (cuda) and combines it with `inputs_embeds` (cpu, from the hooked
embedding): a device mismatch. transformers 5.23 moves the mask to the embeddings' device.
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
    wrapper = torch.nn.ModuleDict({"base": model})  # PEFT's redispatch dispatches its wrapper around the base
    device_map = {f"base.model.language_model.{name}": "cpu" for name, _ in model.model.language_model.named_children()}
    dispatch_model(wrapper, device_map | {"base.lm_head": "disk"}, offload_dir=tempfile.mkdtemp())  # main: cpu
    out = model(input_ids=ids.to("cuda")).logits  # generate calls the base, with the user's inputs on the GPU
assert torch.allclose(out.cpu(), expected), f"output differs: max error {(out.cpu() - expected).abs().max():.3g}"
print("output matches the reference")
