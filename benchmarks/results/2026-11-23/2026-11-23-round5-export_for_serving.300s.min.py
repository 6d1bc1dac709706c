# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from export_for_serving.py: 75 -> 16 code lines.
# Fails with: UnboundLocalError: cannot access local variable 'has_been_replaced' where it is not associated with a value  (in transformers.integrations.bitsandbytes:dequantize_and_replace)
# Guard: passes under /work/main/.minrepro/envs/pinned-patched/bin/python
import logging
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import BitsAndBytesConfig, Qwen2Config, Qwen2ForCausalLM

log = logging.getLogger('export')
scratch = tempfile.mkdtemp()
root = Path(scratch)
config = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
path = root / 'source'
Qwen2ForCausalLM(config).save_pretrained(path)
source = path
quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=True)
model = Qwen2ForCausalLM.from_pretrained(source, quantization_config=quant, device_map={'': 'cpu'})
model = model.dequantize(dtype=getattr(torch, 'float32'))
