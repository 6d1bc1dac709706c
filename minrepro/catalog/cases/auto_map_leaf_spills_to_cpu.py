# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0"]
# ///
"""Family AA (transformers#46823): `device_map="auto"` spills to cpu with GPU budget to spare.

`get_balanced_memory` caps every GPU but the last at an even share plus a buffer sized from the no-split blocks; an
embedding larger than that cap (a leaf, in no block) makes the packing skip GPUs 0-2 for good, so the whole model
lands on the last GPU and its tail on cpu, which 4-bit loading then refuses ("Some modules are dispatched on the
CPU or the disk"). Pure arithmetic on a meta model: the GPU count is faked, no GPU is touched.
"""
import torch

torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 4
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations.accelerate import _get_device_map

config = LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=512, num_hidden_layers=8,
                     num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
with torch.device("meta"):
    model = LlamaForCausalLM(config)
total = sum(p.numel() * p.element_size() for p in model.parameters())
budget = {i: int(total * 0.6) for i in range(4)}  # 2.4x the model over four GPUs
device_map = _get_device_map(model, "auto", {**budget, "cpu": 10 * total}, None)
assert "cpu" not in device_map.values(), f"spilled to cpu with {sum(budget.values()) / total:.1f}x the model on GPUs"
print("every module on a GPU:", sorted(set(device_map.values())))
