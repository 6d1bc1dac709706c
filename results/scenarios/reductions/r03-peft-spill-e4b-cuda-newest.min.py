# Reduced by minrepro from final-spec.py: 9 -> 7 code lines.
# Failure: RuntimeError: Tensor.item() cannot be called on meta tensors  (in bitsandbytes.functional:QuantState.as_dict)
import tempfile
import bitsandbytes as bnb
import torch
from accelerate import dispatch_model
inner = torch.nn.Sequential(bnb.nn.Linear4bit(0, 0))
model = torch.nn.Sequential(torch.nn.Sequential(inner)).to('cpu')
dispatch_model(model, device_map={'0': 'disk', '1': 'cpu'}, offload_dir=tempfile.mkdtemp())
