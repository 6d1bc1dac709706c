# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.15.0", "transformers==5.23.0", "tokenizers==0.23.2"]
# ///
# reduced by minrepro from final-spec.py: 28 -> 5 code lines.
# Fails with: FileNotFoundError: [Errno <num>] No such file or directory: '<path>'  (in accelerate.utils.offload:OffloadedWeightsLoader.__init__)
# Guard: necessity control: with the script's call into the library cut, the failure vanishes
import tempfile

from accelerate import dispatch_model, infer_auto_device_map
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=Gemma4TextConfig(**{'hidden_size': 1, 'vocab_size_per_layer_input': 1})))
dispatch_model(model, device_map=infer_auto_device_map(model, max_memory={'cpu': '1MB'}), offload_dir=tempfile.mkdtemp())  # fails only with max_memory={'cpu': '1MB'}
