# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "bitsandbytes==0.49.2", "tokenizers==0.22.2"]
# ///
"""Family Y, as explore met it first: `dequantize()` of a quantized load whose map put the whole model on disk.

transformers 5.6 leaves such a load undispatched with its 4-bit weights on meta (see
quantized_whole_disk_meta_weights.py), so `dequantize()` finds a `Params4bit` without a quant state and
bitsandbytes' `dequantize_4bit` fails its bare assert. transformers 5.13 and later dispatch the load; there
`dequantize()` still fails, otherwise: it reads the offloaded weights' meta placeholders (fail-other).
"""
import tempfile

from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

root = tempfile.mkdtemp()
text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, head_dim=32, global_head_dim=32, hidden_size_per_layer_input=0,
                        vocab_size=128, num_kv_shared_layers=0, layer_types=["sliding_attention", "full_attention"])
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=None, audio_config=None))
model.save_pretrained(root)
quant = BitsAndBytesConfig(load_in_4bit=True, llm_int8_enable_fp32_cpu_offload=True)
model = Gemma4ForConditionalGeneration.from_pretrained(root, device_map="auto", max_memory={"cpu": "1KB"},
                                                       offload_folder=tempfile.mkdtemp(), quantization_config=quant)
hooks = sum(getattr(getattr(m, "_hf_hook", None), "offload", False) for m in model.modules())
print("map:", getattr(model, "hf_device_map", None), "| modules with an offloading hook:", hooks)
model.dequantize()
print("dequantized:", type(model.model.language_model.layers[0].mlp.down_proj).__name__)
