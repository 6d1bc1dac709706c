# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "peft==0.19.1", "tokenizers==0.22.2"]
# ///
"""Control (passes on every set): a LoRA adapter over a base that accelerate paged to disk itself.

`dispatch_model(offload_dir=...)` writes its own offload files, whose index has no `safetensors_file`, and its hooks
reload those weights when PEFT detaches them. Q's and V's patches, in their first form, took such a base for one that
transformers offloaded from a checkpoint (`KeyError: 'safetensors_file'`, or a KeyError on layer 1's weights): found by
`check benchmarks/scripts/lowmem_chat_server.py --patched`. A patch that makes this fail is harm.
"""
import os
import tempfile

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # on a GPU box PEFT would redispatch onto cuda:0 (family AB), off this path
import torch  # noqa: E402
from accelerate import dispatch_model
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

os.chdir(tempfile.mkdtemp())
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1)
model = LlamaForCausalLM(config)
model.save_pretrained("base")
get_peft_model(model, LoraConfig(target_modules=["q_proj"], init_lora_weights=False)).save_pretrained("adapter")
ids = torch.tensor([[1, 2, 3]])
reference = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained("base"), "adapter")(input_ids=ids).logits
placement = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
             "model.rotary_emb": "cpu", "lm_head": "cpu"}
base = dispatch_model(LlamaForCausalLM.from_pretrained("base"), device_map=placement, offload_dir="offload")
hook = base.model.layers[1].self_attn.q_proj._hf_hook
assert hook.offload and "safetensors_file" not in hook.weights_map.dataset.index["model.layers.1.self_attn.q_proj.weight"]
model = PeftModel.from_pretrained(base, "adapter")
print("PEFT's map:", model.hf_device_map)
torch.testing.assert_close(model(input_ids=ids).logits, reference)
print("adapter over a base accelerate paged to disk itself: logits match a one-device load")
