# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from lowmem_chat_server.py: 109 -> 36 code lines.
# Fails with: TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: passes under /work/main/.minrepro/envs/pinned-patched/bin/python
import os
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM


@dataclass
class ServerSettings:
    hidden: int = 64
    layers: int = 3
    heads: int = 4
    vocab: int = 256
    max_new_tokens: int = 4
    disk_layers: int = 1
    lora_rank: int = 8
    quant_type: str = 'nf4'
    double_quant: bool = True
    prompts: List[str] = field(default_factory=lambda: ['hi'])
    checkpoint: Optional[str] = None
    adapter: Optional[str] = None


def plan_device_map(settings: ServerSettings) -> dict:
    """Everything on cpu except the last `disk_layers` decoder blocks, which we page from disk."""
    device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'model.rotary_emb': 'cpu', 'lm_head': 'cpu'}
    for i in range(3):
        device_map[f'model.layers.{i}'] = 'disk'
    return device_map


settings = ServerSettings(disk_layers=1, max_new_tokens=4, checkpoint=None, adapter=None, prompts=['hi', 'hello there'], double_quant=True)
workdir = tempfile.mkdtemp(prefix='chat-server-')
config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, vocab_size=256)
path = os.path.join(workdir, 'smoke-ckpt')
LlamaForCausalLM(config).save_pretrained(path)
offload_dir = os.path.join(workdir, 'offload')
quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.float32)
base = LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map={'': 'cpu'})
base = dispatch_model(base, device_map=plan_device_map(settings), offload_dir=offload_dir)
