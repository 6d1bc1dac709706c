# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from final-spec.py: 30 -> 8 code lines.
# Fails with: AssertionError  (in bitsandbytes.functional:dequantize_4bit)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import tempfile

from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'hidden_size_per_layer_input': 0}), vision_config=Gemma4VisionConfig(**{'num_hidden_layers': 0, 'num_attention_heads': 0})))  # fails only with vision_config=Gemma4VisionConfig(**{'num_hidden_layers': 0, 'num_attention_heads': 0})
model.save_pretrained(root + '/base')
model = get_peft_model(Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map='balanced', quantization_config=BitsAndBytesConfig(llm_int8_enable_fp32_cpu_offload=True), max_memory={'cpu': '3MB'}), LoraConfig())  # fails only with device_map='balanced'; fails only with max_memory={'cpu': '3MB'}
model.dequantize()
