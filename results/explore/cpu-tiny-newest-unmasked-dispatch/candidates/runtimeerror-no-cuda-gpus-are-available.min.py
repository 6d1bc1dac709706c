# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "bitsandbytes==0.50.2", "peft==0.21.2", "transformers==5.23.0", "tokenizers==0.23.3"]
# ///
# reduced by minrepro from final-spec.py: 35 -> 13 code lines.
# Fails with: RuntimeError: Cannot access accelerator device when none is available.  (in bitsandbytes.nn.modules:Int8Params.to)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import tempfile

import torch
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

root = tempfile.mkdtemp()
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'sliding_window': 0, 'hidden_size_per_layer_input': 0})))
model.save_pretrained(root + '/base')
model = get_peft_model(Gemma4ForConditionalGeneration.from_pretrained(root + '/base', quantization_config=BitsAndBytesConfig(load_in_8bit=True)), LoraConfig(target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']))
dispatch_model(model, device_map={'': 'cpu', 'base_model.model.model.language_model.layers.1.mlp': 'disk'}, offload_dir=tempfile.mkdtemp())
model(input_ids=torch.tensor([[0, 0, 0, 0]])).logits.shape
changed = sorted()
assert not changed, f'from_pretrained rewrote the base checkpoint: {changed}'
