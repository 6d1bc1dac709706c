"""Is the 2-GPU embed failure Gemma 4's, or any model whose tied embedding is split from lm_head by a dict map?

Run: python embed_tied_untied_controls.py gemma4|llama tied|untied [nople] (two GPUs). Its results are
on family L's page (docs/families/gemma4-multimodal-mask-device.md).
"""
import sys
import tempfile
import torch
from transformers import (Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, LlamaConfig,
                          LlamaForCausalLM)

arch, tie = sys.argv[1], sys.argv[2] == "tied"
path = tempfile.mkdtemp()
if arch == "gemma4":
    text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=0 if 'nople' in sys.argv else 16,
                            vocab_size=128, vocab_size_per_layer_input=128, num_kv_shared_layers=0,
                            layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=tie)
    cfg = Gemma4Config(text_config=text, vision_config=None, audio_config=None, tie_word_embeddings=tie)
    Gemma4ForConditionalGeneration(cfg).save_pretrained(path)
    cls, embed = Gemma4ForConditionalGeneration, "model.language_model.embed_tokens"
else:
    LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                                 num_key_value_heads=1, vocab_size=128, tie_word_embeddings=tie)).save_pretrained(path)
    cls, embed = LlamaForCausalLM, "model.embed_tokens"
model = cls.from_pretrained(path, device_map={"": 0, embed: 1})
w = model.get_input_embeddings().weight
print("tied" if w is model.get_output_embeddings().weight else "untied", "embed weight on", w.device,
      "lm_head on", model.get_output_embeddings().weight.device, flush=True)
print("ok logits on", model(input_ids=torch.tensor([[2, 3, 4]], device=0)).logits.device)
