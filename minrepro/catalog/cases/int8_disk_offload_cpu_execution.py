# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2", "accelerate==1.13.0"]
# ///
"""Family X (CPU-only machine): a disk-offloaded INT8 layer executed on the cpu is sent to cuda:0 on every forward.

`set_module_tensor_to_device` quantizes an `Int8Params` headed for the cpu by going through the GPU,
`.to(0).to("cpu")`. It does so for weights that are already int8 too: the offload hook of a disk layer loads them
back before each forward. On a machine without an accelerator `.to(0)` raises, although bitsandbytes runs INT8 on
the cpu. Found by `minrepro explore` on CPU (newest, an 8-bit Gemma 4 under `get_peft_model`, then the user's own
`dispatch_model` with one MLP on disk).
"""
import tempfile

import bitsandbytes as bnb
import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(bnb.nn.Linear8bitLt(8, 8, has_fp16_weights=False),
                            bnb.nn.Linear8bitLt(8, 8, has_fp16_weights=False)).to("cpu")  # quantized on the cpu
x = torch.randn(2, 8, dtype=torch.float16)
expected = model(x)
dispatch_model(model, device_map={"0": "cpu", "1": "disk"}, offload_dir=tempfile.mkdtemp())
print("offload hooks on", [n for n, m in model.named_modules() if getattr(getattr(m, "_hf_hook", None), "offload", 0)])
print("max difference to the model in memory:", (model(x) - expected).abs().max().item())
assert torch.equal(model(x), expected)
