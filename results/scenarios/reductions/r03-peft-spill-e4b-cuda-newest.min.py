# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2"]
# ///
# reduced by minrepro from toy.py: 9 -> 7 code lines.
# Fails with: RuntimeError: Tensor.item() cannot be called on meta tensors  (in bitsandbytes.functional:QuantState.as_dict)
# Guard: passes with the A patches (quant-state-meta-item) on newest
import tempfile

import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

inner = torch.nn.Sequential(bnb.nn.Linear4bit(1, 1, compress_statistics=True))  # fails only with compress_statistics=True
model = torch.nn.Sequential(torch.nn.Sequential(inner)).to('cpu')
dispatch_model(model, device_map={'0': 'disk'}, offload_dir=tempfile.mkdtemp())
