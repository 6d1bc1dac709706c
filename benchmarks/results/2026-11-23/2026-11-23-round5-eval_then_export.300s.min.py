# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from eval_then_export.py: 80 -> 29 code lines.
# Fails with: RuntimeError: merged model's eval loss drifts by <num>; refusing to export
# Guard: passes under /work/main/.minrepro/envs/pinned-patched/bin/python
import math
import random
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Qwen2Config, Qwen2ForCausalLM


def heldout_batches(vocab_size):
    rng = random.Random(1234)
    rows = [[rng.randrange(3, vocab_size) for _ in range(12)] for _ in range(2)]
    yield torch.tensor(rows)


def evaluate(model, batches):
    losses = []
    ids = next(iter(batches))
    losses.append(model(input_ids=ids, labels=ids).loss.item())
    return sum(losses) / len(losses)


def summarize(loss):
    ppl = math.exp(loss)
    return {'loss': loss, 'ppl': ppl}


torch.manual_seed(0)
path = Path(tempfile.mkdtemp()) / 'base'
Qwen2ForCausalLM(Qwen2Config(**{'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'num_key_value_heads': 2, 'vocab_size': 200})).save_pretrained(path)
model = get_peft_model(Qwen2ForCausalLM.from_pretrained(path, quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=None), device_map={'': 'cpu'}), LoraConfig(task_type='CAUSAL_LM', **{'r': 8, 'lora_alpha': 16, 'lora_dropout': 0.0, 'target_modules': ['q_proj', 'v_proj', 'o_proj']}))
vocab = 200
summary = {'adapter': summarize(evaluate(model, heldout_batches(vocab)))}
summary['merged'] = summarize(evaluate(model.merge_and_unload(), heldout_batches(vocab)))
drift = abs(summary['merged']['loss'] - summary['adapter']['loss'])
if drift > 0.001:
    raise RuntimeError(f"merged model's eval loss drifts by {drift:.4f}; refusing to export")
