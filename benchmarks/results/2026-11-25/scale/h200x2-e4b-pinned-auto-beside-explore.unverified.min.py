# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# INTERRUPTED, NOT VERIFIED: reduced by minrepro from eval_gemma4_gpu.py: 53 -> 48 code lines.
# Fails with: TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: passes under accelerate 1.13.0, bitsandbytes 0.49.2, peft 0.19.1, torch 2.11.0, transformers 5.6.2 with 22 minrepro patches (accelerate/params4bit-hf-initialized.diff, accelerate/quant-state-meta-item.diff, bitsandbytes/quant-state-meta-copy.diff, accelerate/shared-dict-hook-keyerror.diff, peft/gemma4-shared-kv-keyerror.diff, peft/clippable-wrapper-target@0.19.1.diff, peft/dequantize-merge-quant-state.diff, peft/lora-4bit-merge-parity.diff, bitsandbytes/linear4bit-repack-rewrite@0.49.2.diff, bitsandbytes/merge-after-cpu-eval-forward.diff, bitsandbytes/linear4bit-cpu-repack-shape@0.49.2.diff, transformers/gemma4-offloaded-pad-embedding@5.6.2.diff, transformers/gemma4-multimodal-mask-device@5.6.2.diff, transformers/dequantize-no-quantized-linear@5.6.2.diff, accelerate/int8-offload-backward-scb.diff, accelerate/root-entry-disk-offload@1.14.0.diff, peft/peft-update-offload-prefix@0.19.1.diff, transformers/tied-head-disk-offload@5.6.2.diff, peft/lora-offloaded-meta-adapter@0.19.1.diff, transformers/int8-offload-lost-scb@5.6.2.diff, accelerate/int8-disk-offload-cpu-execution.diff, accelerate/split-module-buffer-unplaced.diff)
'Evaluate our Gemma 4 LoRA adapter on a single-GPU box: the base loads in 4-bit (double quant) with the vision and\naudio towers kept on the CPU, the adapter loads under a GPU/RAM budget (PEFT spreads the model over GPU, RAM and\ndisk), then a few prompts are generated greedily and timed.\n\n    python eval_gemma4_gpu.py --model-dir /data/gemma4-e4b/base --adapter-dir /data/gemma4-e4b/adapter\n'

import argparse
import json
import logging
import os
import tempfile
import time

import torch
from peft import PeftModel
from transformers import AutoModelForImageTextToText, BitsAndBytesConfig

import tempfile

import transformers
import peft

transformers.set_seed(0)
twin_dir = tempfile.mkdtemp()
twin = transformers.Gemma4ForConditionalGeneration(transformers.AutoConfig.for_model('gemma4', **{'text_config': {'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 15, 'num_key_value_heads': 1, 'layer_types': ['sliding_attention', 'full_attention', 'sliding_attention', 'full_attention', 'sliding_attention', 'full_attention', 'sliding_attention', 'full_attention', 'sliding_attention', 'sliding_attention', 'full_attention', 'sliding_attention', 'full_attention', 'sliding_attention', 'full_attention'], 'final_logit_softcapping': 30.0, 'num_kv_shared_layers': 7, 'use_double_wide_mlp': True, 'global_head_dim': 32, 'head_dim': 32, 'hidden_size_per_layer_input': 4, 'num_attention_heads': 2}, 'vision_config': {'architectures': None, 'output_hidden_states': False, 'return_dict': True, 'dtype': 'bfloat16', 'chunk_size_feed_forward': 0, 'is_encoder_decoder': False, 'id2label': {'0': 'LABEL_0', '1': 'LABEL_1'}, 'label2id': {'LABEL_0': 0, 'LABEL_1': 1}, 'problem_type': None, 'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 16, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 32, 'hidden_activation': 'gelu_pytorch_tanh', 'rms_norm_eps': 1e-06, 'max_position_embeddings': 131072, 'attention_bias': False, 'attention_dropout': 0.0, 'rope_parameters': {'rope_theta': 100.0, 'rope_type': 'default'}, 'pooling_kernel_size': 3, 'patch_size': 16, 'position_embedding_size': 10240, 'use_clipped_linears': False, 'standardize': False, 'initializer_range': 0.02, '_name_or_path': '', 'model_type': 'gemma4_vision', 'output_attentions': False}, 'audio_config': {'architectures': None, 'output_hidden_states': False, 'return_dict': True, 'dtype': 'bfloat16', 'chunk_size_feed_forward': 0, 'is_encoder_decoder': False, 'id2label': {'0': 'LABEL_0', '1': 'LABEL_1'}, 'label2id': {'LABEL_0': 0, 'LABEL_1': 1}, 'problem_type': None, 'hidden_size': 64, 'num_hidden_layers': 12, 'num_attention_heads': 2, 'hidden_act': 'silu', 'subsampling_conv_channels': [128, 32], 'conv_kernel_size': 5, 'residual_weight': 0.5, 'attention_chunk_size': 12, 'attention_context_left': 13, 'attention_context_right': 0, 'attention_logit_cap': 50.0, 'attention_invalid_logits_value': -1000000000.0, 'use_clipped_linears': True, 'rms_norm_eps': 1e-06, 'gradient_clipping': 10000000000.0, 'output_proj_dims': 64, 'initializer_range': 0.02, '_name_or_path': '', 'model_type': 'gemma4_audio', 'output_attentions': False}}))
twin.save_pretrained(twin_dir + '/model0')
peft.get_peft_model(twin, peft.LoraConfig(**{'r': 16, 'target_modules': '.*language_model.*\\.(q_proj|v_proj)', 'lora_alpha': 32, 'lora_dropout': 0.05, 'init_lora_weights': False})).save_pretrained(twin_dir + '/adapter0')
log = logging.getLogger('gemma4-eval')
CKPT = '/tmp/w0/gemma4-e4b'
PROMPTS = [[2, 106, 1645, 108], [2, 106, 2094, 1217, 108], [2, 106, 5123, 108, 3, 4]]
logging.basicConfig(level=20, format='%(asctime)s %(name)s %(message)s')
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('--model-dir', default=os.path.join(CKPT, 'base'))
parser.add_argument('--adapter-dir', default=os.path.join(CKPT, 'adapter'))
parser.add_argument('--gpu-budget', default='1GiB')
parser.add_argument('--cpu-budget', default='8GiB')
parser.add_argument('--max-new-tokens', type=int, default=8)
parser.add_argument('--out', default=None)
args = parser.parse_args()
quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16, llm_int8_enable_fp32_cpu_offload=True)
towers_on_cpu = {'model.vision_tower': 'cpu', 'model.audio_tower': 'cpu', '': 0}
started = time.time()
base = AutoModelForImageTextToText.from_pretrained(twin_dir + '/model0', quantization_config=quant, dtype=torch.bfloat16, offload_folder=tempfile.mkdtemp(prefix='base-offload-'), device_map={'model.vision_tower': 'cpu', 'model.audio_tower': 'cpu', '': 0})
log.info('base loaded in %.1f s', time.time() - started)
model = PeftModel.from_pretrained(base, twin_dir + '/adapter0', offload_dir=tempfile.mkdtemp(prefix='adapter-offload-'), device_map={'base_model.model.model.language_model.embed_tokens': 'cpu', 'base_model.model.lm_head': 'cpu', 'base_model.model.model.language_model.layers.0': 'cpu', 'base_model.model.model.language_model.layers.1': 'cpu', 'base_model.model.model.language_model.layers.2': 'cpu', 'base_model.model.model.language_model.layers.3': 'cpu', 'base_model.model.model.language_model.layers.4': 'cpu', 'base_model.model.model.language_model.layers.5': 'cpu', 'base_model.model.model.language_model.layers.6': 'cpu', 'base_model.model.model.language_model.layers.7': 'cpu', 'base_model.model.model.language_model.layers.8': 'cpu', 'base_model.model.model.language_model.layers.9': 'disk', 'base_model.model.model.language_model.layers.10': 'disk', 'base_model.model.model.language_model.layers.11': 'disk', 'base_model.model.model.language_model.layers.12': 'disk', 'base_model.model.model.language_model.layers.13': 'disk', 'base_model.model.model.language_model.layers.14': 'disk', 'base_model.model.model.language_model.norm': 'disk', 'base_model.model.model.language_model.rotary_emb': 'disk', 'base_model.model.model.language_model.embed_tokens_per_layer': 'disk', 'base_model.model.model.language_model.per_layer_model_projection': 'disk', 'base_model.model.model.language_model.per_layer_projection_norm': 'disk', 'base_model.model.model.audio_tower': 'disk', 'base_model.model.model.embed_vision': 'disk', 'base_model.model.model.embed_audio': 'disk', 'base_model.model.model.vision_tower': 'cpu'})
log.info('adapter loaded: %s', sorted(set(map(str, getattr(model, 'hf_device_map', {}).values()))))
model = model.eval()
rows = []
for i, prompt in enumerate(PROMPTS):
    ids = torch.tensor([prompt], device='cuda:0')
    started = time.time()
    out = model.generate(input_ids=ids, max_new_tokens=args.max_new_tokens, do_sample=False)
    rows.append({'prompt': i, 'new_tokens': int(out.shape[1] - ids.shape[1]), 'seconds': round(time.time() - started, 2)})
    log.info('prompt %d: %s', i, rows[-1])
if args.out:
    fh = open(args.out, 'w')
    json.dump(rows, fh)
print(json.dumps({'prompts': len(rows), 'tokens': sum((r['new_tokens'] for r in rows))}))
