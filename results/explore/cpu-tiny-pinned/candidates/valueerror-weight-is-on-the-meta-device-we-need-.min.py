# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from final-spec.py: 26 -> 7 code lines.
# Fails with: ValueError: weight is on the meta device, we need a `value` to put in on cpu.  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import tempfile

from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'hidden_size_per_layer_input': 0}))
root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(config)
model.save_pretrained(root + '/base')
base = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={'': 'cpu', 'model.language_model.layers.3': 'disk'})  # fails only with device_map={'': 'cpu', 'model.language_model.layers.3': 'disk'}
