# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "bitsandbytes==0.49.2", "tokenizers==0.22.2"]
# ///
"""Family W: an 8-bit load that offloads layers to disk deletes `SCB` from the weights it leaves on meta.

transformers' `Bnb8bitQuantize.convert` builds the quantized weight from the model's parameter's `__dict__` and pops
"SCB" from that dict itself, not from a copy: the parameter that stays in the model (on meta, for a disk entry) loses
the attribute `Int8Params.__new__` always sets. `dispatch_model`'s `check_device_map` then builds a state_dict, and
bitsandbytes' `Linear8bitLt._save_to_state_dict` reads `self.weight.SCB`. bitsandbytes 0.50 reads it with a default,
which hides it; transformers still pops from the parameter. Found by `minrepro explore` on CPU (pinned).
"""
import tempfile

from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

root = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1)
LlamaForCausalLM(config).save_pretrained(root + "/base")
quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=True)
# "auto" under a small budget: the map is inferred after every Linear became a Linear8bitLt, so disk layers are 8-bit
model = LlamaForCausalLM.from_pretrained(root + "/base", device_map="auto", max_memory={"cpu": "20KB"},
                                         quantization_config=quant, offload_folder=root + "/offload")
weight = model.model.layers[1].self_attn.q_proj.weight
print("loaded:", model.hf_device_map, type(weight).__name__, weight.device, "SCB" in weight.__dict__)
