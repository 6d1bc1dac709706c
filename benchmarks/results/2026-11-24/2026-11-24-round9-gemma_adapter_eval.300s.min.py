# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.3"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from gemma_adapter_eval.py: 95 -> 18 code lines.
# Fails with: RuntimeError: Tensor on device meta is not on the expected device cpu!  (in transformers.models.gemma4.modeling_gemma4:Gemma4Model.forward)
# Guard: passes under /root/envs/newest-patched/bin/python
import os
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig


def tiny_gemma():
    text = Gemma4TextConfig(hidden_size=8, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, head_dim=64, global_head_dim=1, vocab_size=128, vocab_size_per_layer_input=1)
    vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=1, num_key_value_heads=1)
    audio = Gemma4AudioConfig()
    return Gemma4Config(text_config=text, vision_config=vision)


root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(tiny_gemma())
model.save_pretrained(os.path.join(root, 'base'))
get_peft_model(model, LoraConfig()).save_pretrained(os.path.join(root, 'adapter'))
base_path, adapter_path = (os.path.join(root, 'base'), os.path.join(root, 'adapter'))
model = PeftModel.from_pretrained(Gemma4ForConditionalGeneration.from_pretrained(base_path, device_map={'': 'cpu', 'lm_head': 'disk'}, dtype=torch.bfloat16), adapter_path, offload_dir=tempfile.mkdtemp(), max_memory={'cpu': '3MB'})
i, prompt = next(iter(enumerate([[0, 2, 1, 0], [0, 0, 21], [0, 0, 0, 1, 0]])))
out = model.generate()
