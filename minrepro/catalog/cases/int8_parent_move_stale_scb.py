# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "bitsandbytes==0.49.2"]
# ///
"""Family AE: an 8-bit layer moved by its parent keeps its statistics on the old GPU (bitsandbytes).

`Int8Params.to` returns a new parameter with `SCB` moved, and `Linear8bitLt.to` moves the layer's 8-bit state. Every
module move goes through `Module._apply`, which keeps each Parameter object and assigns only its `.data` (so the new
parameter's `SCB` is dropped), and a parent's `.to()` never calls the child's `to()`. The data moves; `weight.CB` and
`weight.SCB` stay on the old GPU, and the outlier path (threshold 6.0, transformers' default) indexes `CB` there.
In explore's two-GPU row (Gemma 4 in 8-bit over cuda:0 and cuda:1, then `PeftModel.from_pretrained`), PEFT's
one-device redispatch is that parent's `.to(0)`. One GPU shows it too: quantize on cuda:0, move the parent to the CPU
(`mat2 is on cuda:0, different from other tensors on cpu`).

Expected: the layer runs on cuda:0, where its parent was moved.
"""
import bitsandbytes as bnb
import torch

layer = bnb.nn.Linear8bitLt(64, 64, bias=False, has_fp16_weights=False, threshold=6.0)
model = torch.nn.Sequential(layer).to(torch.float16)
layer.to(1)  # quantizes on cuda:1: weight.data is the int8 CB, weight.SCB its scales
model.to(0)  # the parent's move
print("weight on", layer.weight.device, "| CB on", layer.weight.CB.device, "| SCB on", layer.weight.SCB.device)
x = torch.randn(2, 64, dtype=torch.float16, device=0)
x[:, 0] = 20  # an outlier column
print("output on", model(x).device)
