# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "tokenizers==0.22.2", "peft==0.19.1", "accelerate==1.13.0"]
# ///
"""Family C through PEFT: `PeftModel.from_pretrained(..., device_map=...)` on Gemma 4, then generate.

PEFT's `load_adapter` redispatches a model whose `hf_device_map` names cpu/disk, calling
`dispatch_model` without the model's `_skip_keys_device_placement`. The hooks copy Gemma 4's
`shared_kv_states` dict per layer, so a KV-shared layer misses its source layer's entry (the seeds saw
`KeyError: 13` on E2B and `22` on E4B; this 4-layer model reads key 0). Fixed in transformers 5.23.0.
"""
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

cfg = Gemma4TextConfig(
    vocab_size=128, vocab_size_per_layer_input=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
    num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=16,
    num_kv_shared_layers=2, layer_types=["sliding_attention", "full_attention"] * 2,
)
adapter = tempfile.mkdtemp()
get_peft_model(Gemma4ForCausalLM(cfg), LoraConfig(target_modules=["q_proj"])).save_pretrained(adapter)
base, ids = Gemma4ForCausalLM(cfg), torch.tensor([[1, 2, 3]])
expected = base.generate(ids, max_new_tokens=2, do_sample=False)  # the adapter starts as a no-op (lora_B = 0)
base.hf_device_map = {"": "cpu"}  # what from_pretrained(device_map=...) records; PEFT redispatches on cpu/disk
device_map = {"": "cpu", "base_model.model.lm_head": "disk"}
model = PeftModel.from_pretrained(base, adapter, device_map=device_map, offload_dir=adapter + "/offload")
out = model.generate(ids, max_new_tokens=2, do_sample=False)
assert torch.equal(out, expected), f"generated {out.tolist()}, the unoffloaded model {expected.tolist()}"
print("generation matches the reference")
