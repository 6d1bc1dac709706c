# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from eval_then_export.py: 80 -> 37 code lines.
# Fails with: RuntimeError: merged model's eval loss drifts by <num>; refusing to export
# Guard: passes under /root/.cache/minrepro/envs/pinned-patched/bin/python
import json
import math
import random
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Qwen2Config, Qwen2ForCausalLM

DEFAULTS = {'model': {'hidden_size': 64, 'intermediate_size': 64, 'num_attention_heads': 4, 'num_key_value_heads': 2, 'vocab_size': 100}, 'lora': {'r': 8}, 'eval': {'batch_size': 2, 'seq_len': 12, 'seed': 1}, 'export': {'max_loss_drift': 0.0}}


def heldout_batches(cfg, vocab_size):
    rng = random.Random(cfg['seed'])
    rows = [[rng.randrange(vocab_size) for _ in range(cfg['seq_len'])] for _ in range(cfg['batch_size'])]
    yield torch.tensor(rows)


def evaluate(model, batches):
    losses = []
    ids = next(iter(batches))
    losses.append(model(input_ids=ids, labels=ids).loss.item())
    return sum(losses) / len(losses)


def summarize(name, loss):
    ppl = math.exp(loss)
    return {'loss': loss}


config = json.loads(json.dumps(DEFAULTS))
with tempfile.TemporaryDirectory() as root:
    model_cfg = config['model']
    path = Path() / 'base'
    Qwen2ForCausalLM(Qwen2Config(**model_cfg)).save_pretrained(path)
    lora_cfg = config['lora']
    quant = BitsAndBytesConfig(bnb_4bit_quant_type='nf4')
    base = Qwen2ForCausalLM.from_pretrained(path, quantization_config=quant)
    model = get_peft_model(base, LoraConfig())
    vocab = config['model']['vocab_size']
    summary = {'adapter': summarize('adapter', evaluate(model, heldout_batches(config['eval'], vocab)))}
    merged = model.merge_and_unload()
    summary['merged'] = summarize('merged', evaluate(merged, heldout_batches(config['eval'], vocab)))
    drift = abs(summary['merged']['loss'] - summary['adapter']['loss'])
    if drift > config['export']['max_loss_drift']:
        raise RuntimeError(f"merged model's eval loss drifts by {drift:.4f}; refusing to export")
