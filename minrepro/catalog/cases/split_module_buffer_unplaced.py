# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0"]
# ///
"""Family Z (accelerate#4014): a module split by `infer_auto_device_map` leaves its own buffers without a device.

Gemma 4's decoder layer registers `layer_scalar` as a buffer. When a layer does not fit where the search is, the
layer is replaced by its parameters and children: its buffers are dropped, so the map names no device for them
and `check_device_map` (transformers' `from_pretrained`) refuses it. The meta device is enough: no GPU, no weights.
"""
import torch
from accelerate import infer_auto_device_map
from accelerate.utils.modeling import check_device_map


class Layer(torch.nn.Module):  # Gemma4DecoderLayer's shape: children and a buffer of its own
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)
        self.register_buffer("layer_scalar", torch.ones(1))


with torch.device("meta"):
    model = torch.nn.Sequential(Layer(), Layer())
# 40 kB of cpu holds one Linear of the first layer, not the layer (33 kB each): the layer is split, the rest to disk
device_map = infer_auto_device_map(model, max_memory={"cpu": 40000})
check_device_map(model, device_map)
