# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family B: offloading a Linear4bit whose weight carries transformers' `_is_hf_initialized` tag.

transformers' loader sets `_is_hf_initialized` on every parameter it loads. accelerate's
`set_module_tensor_to_device` rebuilds the parameter as `param_cls(value, **old.__dict__)`, and
`Params4bit.__new__` has no `**kwargs`, so the tag becomes an unexpected keyword argument.
Seen in the seeds as `PeftModel.from_pretrained -> load_adapter -> dispatch_model -> ... -> init_hook`.
"""
import tempfile

import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64), torch.nn.Linear(64, 64)).to("cpu")  # .to quantizes
model[0].weight._is_hf_initialized = True  # what from_pretrained leaves on each loaded parameter
dispatch_model(model, device_map={"0": "disk", "1": "cpu"}, offload_dir=tempfile.mkdtemp())
print("dispatched")
