# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from nightly_quant_report.py: 113 -> 38 code lines.
# Fails with: RuntimeError: nightly report failed: TypeError
# Guard: passes under /work/main/.minrepro/envs/pinned-patched/bin/python
import configparser
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field

import torch
from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, MistralConfig, MistralForCausalLM

log = logging.getLogger('nightly')


class Stopwatch:

    def __init__(self):
        self.marks = {}


@dataclass
class Report:
    notes: list = field(default_factory=list)


cfg = configparser.ConfigParser()
cfg.read_string('\n[model]\nhidden_size = 64\nintermediate_size = 128\nlayers = 3\nheads = 4\nkv_heads = 2\nvocab = 128\n\n[quant]\ntype = nf4\ndouble = yes\n\n[offload]\ndisk_layers = 1\n\n[report]\nprompts = 5, 17, 42 | 7, 7, 7, 7 | 1, 2, 3\ntitle = nightly 4-bit report\n')
watch = Stopwatch()
report = Report(cfg['report'].get('title'))
prompts = [[int(t) for t in p.split(',')] for p in cfg['report'].get('prompts').split('|')]
work = tempfile.mkdtemp()
where = os.path.join(work, 'ckpt')
m = cfg['model']
torch.manual_seed(0)
MistralForCausalLM(MistralConfig(hidden_size=m.getint('hidden_size'), intermediate_size=m.getint('intermediate_size'), num_hidden_layers=m.getint('layers'), num_attention_heads=m.getint('heads'), num_key_value_heads=m.getint('kv_heads'), vocab_size=m.getint('vocab'))).save_pretrained(where)
try:
    offload_dir = os.path.join(work, 'offload')
    q = cfg['quant']
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=q.get('type'), bnb_4bit_use_double_quant=q.getboolean('double'), bnb_4bit_compute_dtype=None)
    model = MistralForCausalLM.from_pretrained(where, quantization_config=bnb, device_map={'': 'cpu'})
    layers = cfg['model'].getint('layers')
    device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'model.rotary_emb': 'cpu', 'lm_head': 'cpu'}
    for i in range(layers):
        device_map[f'model.layers.{i}'] = 'disk'
    model = dispatch_model(model, device_map=device_map, offload_dir=offload_dir)
except Exception as exc:
    raise RuntimeError(f'nightly report failed: {type(exc).__name__}') from exc
