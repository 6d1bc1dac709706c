# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from lowmem_chat_server.py: 109 -> 16 code lines.
# Fails with: TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: passes under /work/main/.minrepro/envs/pinned-patched/bin/python
import os
import tempfile
from typing import List

from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

workdir = tempfile.mkdtemp(prefix='chat-server-')
config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, vocab_size=256)
path = os.path.join(workdir, 'smoke-ckpt')
LlamaForCausalLM(config).save_pretrained(path)
offload_dir = os.path.join(workdir, 'offload')
quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=None)
base = LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map={'': 'cpu'})
device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'model.rotary_emb': 'cpu', 'lm_head': 'cpu'}
for i in range(3):
    device_map[f'model.layers.{i}'] = 'disk'
base = dispatch_model(base, device_map=device_map, offload_dir=offload_dir)
