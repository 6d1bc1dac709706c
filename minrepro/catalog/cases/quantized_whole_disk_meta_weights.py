# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "bitsandbytes==0.49.2", "tokenizers==0.22.2"]
# ///
"""Family Y: a quantized load whose map puts the whole model on disk comes back with every weight on meta.

A cpu budget too small for any module (here on a box without a GPU) makes `infer_auto_device_map` return
`{"": "disk"}`. transformers 5.6 dispatches only a map with more than one device, so it attaches no offloading
hook, sets no `hf_device_map`, raises nothing, and the 4-bit weights stay meta placeholders. The first forward
fails far away from the cause. transformers 5.13 and later dispatch a map that names the disk
(huggingface/transformers#46749); before accelerate 1.15, that meets accelerate's refusal of a whole model on disk.
Found by `minrepro explore` (CPU, pinned: a 4-bit and an 8-bit Gemma 4 under "balanced" with a 3MB cpu budget).
"""
import tempfile

import torch
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

root = tempfile.mkdtemp()
text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=0,
                        vocab_size=128, num_kv_shared_layers=0, layer_types=["sliding_attention", "full_attention"])
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=None, audio_config=None))
model.save_pretrained(root)
quant = BitsAndBytesConfig(load_in_4bit=True, llm_int8_enable_fp32_cpu_offload=True)
model = Gemma4ForConditionalGeneration.from_pretrained(root, device_map="auto", max_memory={"cpu": "1KB"},
                                                       offload_folder=tempfile.mkdtemp(), quantization_config=quant)
hooks = sum(getattr(getattr(m, "_hf_hook", None), "offload", False) for m in model.modules())
print("map:", getattr(model, "hf_device_map", None), "| modules with an offloading hook:", hooks)
print("logits:", model(input_ids=torch.tensor([[2, 3, 4, 5]])).logits.shape)
assert hooks > 0, "not the branch in question: no offloading hook"
