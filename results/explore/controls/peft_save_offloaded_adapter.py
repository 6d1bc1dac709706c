"""PeftModel.save_pretrained after PEFT's own redispatch put an adapted layer on disk (CPU, tiny Llama, no
quantization). The two-GPU explorations met it on reporter and newest (`Cannot copy out of meta tensor` in
safetensors, from `PeftModel.save_pretrained`); the base map is spelled out module by module because a root ""
entry beside a disk entry fails at load (family O, minrepro/catalog/cases/root_entry_disk_offload.py).

Run: python peft_save_offloaded_adapter.py. Recorded in docs/findings.md: newest fails in save_pretrained (the
offloaded layer's lora_A/lora_B are meta); pinned and reporter fail first in PEFT's `_update_offload` with
`KeyError: 'base_model.model.model.lm_head'`.
"""
import tempfile

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

root = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
model = LlamaForCausalLM(config)
model.save_pretrained(root + "/base")
get_peft_model(model, LoraConfig(target_modules=["q_proj"], init_lora_weights=False)).save_pretrained(root + "/adapter")
spelled = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
           "model.rotary_emb": "cpu", "lm_head": "cpu"}
base = LlamaForCausalLM.from_pretrained(root + "/base", device_map=spelled, offload_folder=root + "/base-offload")
model = PeftModel.from_pretrained(base, root + "/adapter", offload_dir=root + "/offload",
                                  device_map={f"base_model.model.{k}": v for k, v in spelled.items()})
print({n: p.device.type for n, p in model.named_parameters() if "lora" in n})
model.save_pretrained(root + "/saved")
print("saved")
