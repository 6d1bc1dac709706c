# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.3"]
# ///
# reduced by minrepro from final-spec.py: 30 -> 8 code lines.
# Fails with: ValueError: dequantize_4bit requires both absmax and out when quant_state is not provided  (in bitsandbytes.functional:dequantize_4bit)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import tempfile

from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 2, 'hidden_size_per_layer_input': 0})))
model.save_pretrained(root + '/base')
model = get_peft_model(Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map='balanced', quantization_config=BitsAndBytesConfig(llm_int8_enable_fp32_cpu_offload=True), max_memory={'cpu': '3MB'}), LoraConfig())  # fails only with device_map='balanced'; fails only with max_memory={'cpu': '3MB'}
model.dequantize()
