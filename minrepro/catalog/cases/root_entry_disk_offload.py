# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "tokenizers==0.22.2"]
# ///
"""Family O: a device_map with a root entry beside a disk entry fails at load, for any model.

transformers accepts entries inside other entries (the longest prefix wins) and loads layer 1's weights as meta
placeholders for the disk. accelerate's `dispatch_model` then gives the root entry a hook that places its whole
subtree (`place_submodules=True`), which tries to move those placeholders to the cpu:
`ValueError: weight is on the meta device`. The same placement spelled out module by module loads. Found by
`minrepro explore` (any disk entry in a Gemma 4 base map); a tiny Llama without quantization shows it is not Gemma 4's.
"""
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

path = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained(path)
ids = torch.tensor([[1, 2, 3]])
reference = LlamaForCausalLM.from_pretrained(path, device_map={"": "cpu"})(input_ids=ids).logits
model = LlamaForCausalLM.from_pretrained(path, device_map={"": "cpu", "model.layers.1": "disk"},
                                         offload_folder=tempfile.mkdtemp())
offloaded = model.model.layers[1].mlp.up_proj.weight.device
assert offloaded.type == "meta", f"not the branch in question: layer 1's weight is on {offloaded}, not on disk"
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("root entry beside a disk entry: loads with layer 1 on disk; logits match the one-device load")
