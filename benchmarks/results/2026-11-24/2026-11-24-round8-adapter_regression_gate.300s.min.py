# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from adapter_regression_gate.py: 113 -> 25 code lines.
# Fails with: KeyError: <key>  (in accelerate.utils.offload:OffloadedWeightsLoader.__getitem__)
# Guard: passes under /root/envs/pp/bin/python
import os
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

workdir = tempfile.mkdtemp()
model = LlamaForCausalLM(LlamaConfig(**{'hidden_size': 1, 'intermediate_size': 1, 'num_attention_heads': 1, 'tie_word_embeddings': True}))
model.save_pretrained(os.path.join(workdir, 'base'))
where = os.path.join(workdir, 'base')
reference = LlamaForCausalLM.from_pretrained(where)
sizes = {'model.embed_tokens': reference.model.embed_tokens.weight.numel(), 'model.norm': 0, 'lm_head': reference.lm_head.weight.numel()}
for i, layer in enumerate(reference.model.layers):
    sizes[f'model.layers.{i}'] = sum((p.numel() for p in layer.parameters()))
always_page = ['lm_head']
placement, used = ({}, 0)
for name, size in sorted(sizes.items()):
    fits = used + size <= 1250 and name not in always_page
    placement[name] = 'cpu' if fits else 'disk'
device_map = placement
model = LlamaForCausalLM.from_pretrained(where, device_map=device_map)
model = get_peft_model(model, LoraConfig())
prompts = [[0, 0, 0, 0], [0, 0, 0], [0, 0, 0, 0, 0, 0]]
prompt = next(iter(prompts))
ids = torch.tensor([prompt])
model(input_ids=ids).loss.item()
