# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0"]
# ///
"""Family U: accelerate 1.15's full disk offloading (accelerate#4083) fails for the root entry `{"": "disk"}`.

1.15 attaches hooks whenever a map names the disk, so a whole model mapped to disk no longer meets 1.13/1.14's
refusal ("use the `disk_offload` function instead"). It then writes the disk modules' weights by name prefix, and
the root entry's name is empty: `extract_submodules_state_dict` matches no key, no `index.json` is written, and the
offload loader's `__init__` cannot open it. Found by `minrepro explore` (CPU, newest: a Gemma 4 base dispatched with a
map `infer_auto_device_map` made under a 1MB budget), reduced to 5 lines there; a one-layer model fails alike.
"""
import tempfile

import torch
from accelerate import dispatch_model

model = torch.nn.Sequential(torch.nn.Linear(4, 4))
x = torch.randn(1, 4)
reference = model(x)
model = dispatch_model(model, device_map={"": "disk"}, offload_dir=tempfile.mkdtemp())
hook = getattr(model[0], "_hf_hook", None)
assert hook is not None and hook.offload, "not the branch in question: the layer has no offloading hook"
torch.testing.assert_close(model(x), reference)
print("the whole model on disk: output equals the model's in memory")
