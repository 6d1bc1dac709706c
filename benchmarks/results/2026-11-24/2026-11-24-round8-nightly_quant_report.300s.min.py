# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from nightly_quant_report.py: 113 -> 20 code lines.
# Fails with: RuntimeError: nightly report failed: TypeError
# Guard: passes under /root/envs/pp/bin/python
import os
import tempfile

import torch
from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, MistralConfig, MistralForCausalLM

work = tempfile.mkdtemp()
where = os.path.join(work)
torch.manual_seed(0)
MistralForCausalLM(MistralConfig(hidden_size=32, num_hidden_layers=1)).save_pretrained(where)
try:
    offload_dir = os.path.join(work)
    bnb = BitsAndBytesConfig()
    model = MistralForCausalLM.from_pretrained(where, quantization_config=bnb)  # fails only with quantization_config=bnb
    layers = 1
    device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'lm_head': 'cpu'}
    i = next(iter(range(layers)))
    device_map[f'model.layers.{i}'] = 'disk'
    model = dispatch_model(model, device_map=device_map, offload_dir=offload_dir)
except Exception as exc:
    raise RuntimeError(f'nightly report failed: {type(exc).__name__}') from exc
