# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family B, its INT8 twin: offloading a Linear8bitLt whose weight carries transformers' `_is_hf_initialized` tag.

The same accelerate line as Params4bit's: `set_module_tensor_to_device` rebuilds the parameter as
`param_cls(value, **old.__dict__)`, and `Int8Params.__new__` (bnb < 0.50) has no `**kwargs`. Found by
`minrepro explore` on CPU (pinned, every other patch applied): an 8-bit Gemma 4 with a cpu/disk map.
"""
import tempfile

import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False), torch.nn.Linear(64, 64)).to("cpu")
model[0].weight._is_hf_initialized = True  # what from_pretrained leaves on each loaded parameter
dispatch_model(model, device_map={"0": "disk", "1": "cpu"}, offload_dir=tempfile.mkdtemp())
print("dispatched; offloaded:", [name for name, m in model.named_modules() if hasattr(m, "_hf_hook")])
