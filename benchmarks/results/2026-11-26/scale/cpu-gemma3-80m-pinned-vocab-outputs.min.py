# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "accelerate==1.13.0", "bitsandbytes==0.49.2", "peft==0.19.1", "transformers==5.6.2", "tokenizers==0.22.2"]
# ///
# reduced by minrepro from eval_adapter.py: 74 -> 11 code lines.
# Fails with: TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'  (in accelerate.utils.modeling:set_module_tensor_to_device)
# Guard: passes with the B patches (params4bit-hf-initialized) on pinned
import tempfile

from accelerate import dispatch_model
from peft import PeftModel
from transformers import AutoModelForCausalLM, BitsAndBytesConfig
import transformers
import peft

twin_dir = tempfile.mkdtemp()
twin = transformers.Gemma3ForCausalLM(transformers.AutoConfig.for_model('gemma3_text', **{'vocab_size': 256, 'hidden_size': 64, 'intermediate_size': 128, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 32}))
twin.save_pretrained(twin_dir + '/model0')
peft.get_peft_model(twin, peft.LoraConfig()).save_pretrained(twin_dir + '/adapter0')
dispatch_model(PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(twin_dir + '/model0', quantization_config=BitsAndBytesConfig()), twin_dir + '/adapter0'), offload_dir=tempfile.mkdtemp(), device_map={'base_model.model.model.embed_tokens': 'cpu', 'base_model.model.lm_head': 'cpu', 'base_model.model.model.layers.0': 'disk', 'base_model.model.model.norm': 'disk'})  # fails only with quantization_config=BitsAndBytesConfig()
