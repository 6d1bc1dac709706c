# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from lowmem_chat_server.py: 109 -> 23 code lines.
# Fails with: TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: passes under /root/.cache/minrepro/envs/pinned-patched/bin/python
import os
import tempfile

from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM


class ServerSettings:
    pass


def make_smoke_checkpoint(settings: ServerSettings, root: str) -> str:
    config = LlamaConfig(hidden_size=32, num_hidden_layers=1)
    path = os.path.join(root)
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def plan_device_map(settings: ServerSettings) -> dict:
    device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'lm_head': 'cpu'}
    i = next(iter(range(1)))
    device_map[f'model.layers.{i}'] = 'disk'
    return device_map


settings = ServerSettings()
workdir = tempfile.mkdtemp()
path = None or make_smoke_checkpoint(settings, workdir)
offload_dir = os.path.join(workdir)
quant = BitsAndBytesConfig()
base = LlamaForCausalLM.from_pretrained(path, quantization_config=quant)  # fails only with quantization_config=quant
base = dispatch_model(base, device_map=plan_device_map(settings), offload_dir=offload_dir)
