# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from final-spec.py: 26 -> 8 code lines.
# Fails with: KeyError: <key>  (in peft.peft_model:PeftModel._update_offload)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import tempfile

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'vocab_size_per_layer_input': 1})))
model.save_pretrained(root + '/base')
get_peft_model(model, LoraConfig()).save_pretrained(root + '/adapter')
model = PeftModel.from_pretrained(Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 'cpu', 'model.language_model.layers.3': 'disk'}), root + '/adapter')  # fails only with device_map={'': 'cpu', 'model.language_model.layers.3': 'disk'}
