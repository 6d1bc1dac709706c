# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from nightly_quant_report.py: 113 -> 57 code lines.
# Fails with: RuntimeError: nightly report failed: TypeError
# Guard: passes under /work/main/.minrepro/envs/pinned-patched/bin/python
import configparser
import logging
import math
import os
import tempfile
import time
from dataclasses import dataclass, field

import torch
from accelerate import dispatch_model
from transformers import BitsAndBytesConfig, MistralConfig, MistralForCausalLM

DEFAULT_INI = '\n[model]\nhidden_size = 64\nintermediate_size = 128\nlayers = 3\nheads = 4\nkv_heads = 2\nvocab = 128\n\n[quant]\ntype = nf4\ndouble = yes\n\n[offload]\ndisk_layers = 1\n\n[report]\nprompts = 5, 17, 42 | 7, 7, 7, 7 | 1, 2, 3\ntitle = nightly 4-bit report\n'
log = logging.getLogger('nightly')


class Stopwatch:

    def __init__(self):
        self.marks = {}
        self._last = time.perf_counter()


@dataclass
class Report:
    title: str
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_markdown(self):
        lines = [f'# {self.title}', '', '| prompt | nll | ppl |', '|---|---|---|']
        lines += [f'| {p} | {nll:.3f} | {math.exp(nll):.1f} |' for p, nll in self.rows]
        return '\n'.join(lines + [''] + [f'- {n}' for n in self.notes])


cfg = configparser.ConfigParser()
cfg.read_string(DEFAULT_INI)
watch = Stopwatch()
report = Report('nightly 4-bit report')
prompts = [[int(t) for t in p.split(',')] for p in '5, 17, 42 | 7, 7, 7, 7 | 1, 2, 3'.split('|')]
work = tempfile.mkdtemp()
where = os.path.join(work, 'ckpt')
config = MistralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
torch.manual_seed(0)
MistralForCausalLM(config).save_pretrained(where)
try:
    where = os.path.join(work, 'ckpt')
    offload_dir = os.path.join(work, 'offload')
    q = cfg['quant']
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.float32)
    model = MistralForCausalLM.from_pretrained(where, quantization_config=bnb, device_map={'': 'cpu'})
    layers = 3
    on_disk = 1
    device_map = {'model.embed_tokens': 'cpu', 'model.norm': 'cpu', 'model.rotary_emb': 'cpu', 'lm_head': 'cpu'}
    for i in range(layers):
        device_map[f'model.layers.{i}'] = 'disk'
    model = dispatch_model(model, device_map=device_map, offload_dir=offload_dir)
    watch.mark('load')
    rows = []
    prompt = next(iter(prompts))
    ids = torch.tensor([prompt])
    rows.append((prompt, model(input_ids=ids, labels=ids).loss.item()))
    report.rows = rows
    watch.mark('score')
except Exception as exc:
    log.error('stage failed after %s', list(watch.marks))
    raise RuntimeError(f'nightly report failed: {type(exc).__name__}') from exc
