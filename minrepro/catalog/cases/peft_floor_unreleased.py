# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.24.0", "peft==0.21.2"]
# ///
"""Family AG: transformers 5.24.0 asks for PEFT >= 0.22.0, a release that does not exist, so its adapter API refuses.

`transformers.integrations.peft.MIN_PEFT_VERSION` went from "0.20.0" (5.23.0) to "0.22.0" (5.24.0) while the newest
PEFT on the index is 0.21.2; the integration's code is otherwise unchanged. `add_adapter`, `set_adapter`,
`enable_adapters`, `disable_adapters`, `active_adapters`, `get_adapter_state_dict` and `delete_adapter` call
`check_peft_version` first, so they refuse every released PEFT. Passes on 5.23.0; any CPU, no quantization.
"""
from peft import LoraConfig
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64)
model = LlamaForCausalLM(config)
model.add_adapter(LoraConfig(target_modules=["q_proj"]))
print("add_adapter took a LoRA adapter:", model.active_adapters())
