# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from lowmem_chat_server.py: 109 -> 31 code lines.
# Fails with: TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: passes under /root/.cache/minrepro/envs/pinned-patched/bin/python
import os
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM


@dataclass
class ServerSettings:
    max_new_tokens: int = 4
    disk_layers: int = 1
    double_quant: bool = True
    prompts: List[str] = field(default_factory=lambda: ['hi'])
    checkpoint: Optional[str] = None
    adapter: Optional[str] = None


def make_smoke_checkpoint(settings: ServerSettings, root: str) -> str:
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_key_value_heads=4)
    path = os.path.join(root, 'smoke-ckpt')
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def plan_device_map(settings: ServerSettings) -> dict:
    device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'model.rotary_emb': 'cpu', 'lm_head': 'cpu'}
    for i in range(3):
        device_map[f'model.layers.{i}'] = 'disk'
    return device_map


settings = ServerSettings(disk_layers=1, max_new_tokens=4, checkpoint=None, prompts=['hi', 'hello there'], double_quant=True)
workdir = tempfile.mkdtemp()
path = None or make_smoke_checkpoint(settings, workdir)
offload_dir = os.path.join(workdir, 'offload')
quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_compute_dtype=None)
base = LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map={'': 'cpu'})
base = dispatch_model(base, device_map=plan_device_map(settings), offload_dir=offload_dir)
