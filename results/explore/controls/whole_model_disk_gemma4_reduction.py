"""Control for family U: explore's 5-line Gemma 4 reduction, printing the map it dispatched and what reached
offloading hooks, so that a pass under the patch says which branch it reached (dispatch only, no forward)."""
import tempfile
from accelerate import dispatch_model, infer_auto_device_map
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'vocab_size_per_layer_input': 1})))
device_map = infer_auto_device_map(model, max_memory={'cpu': '1MB'})
dispatch_model(model, device_map=device_map, offload_dir=tempfile.mkdtemp())
hooks = sum(getattr(getattr(m, "_hf_hook", None), "offload", False) for m in model.modules())
params = sum(1 for p in model.parameters())
print(f"map {device_map}; modules with offloading hooks: {hooks}; parameters on meta: {sum(p.device.type == 'meta' for p in model.parameters())} of {params}")
