# /// script
# requires-python = ">=3.10"
# dependencies = ["torch", "transformers==5.6.2", "accelerate==1.13.0", "bitsandbytes==0.49.2", "tokenizers==0.22.2"]
# ///
"""Family M: `model.dequantize()` on a bitsandbytes model with no quantized Linear raises UnboundLocalError.

transformers' `dequantize_and_replace` binds `has_been_replaced` only inside its loop over quantized modules and
reads it after the loop. With every module mapped to cpu (transformers then keeps them unquantized under
`llm_int8_enable_fp32_cpu_offload`) there is none, and instead of its warning "the model has not been properly
dequantized" it raises. Found by `minrepro explore` (INT8, a cpu device_map, LoRA, dequantize then merge).
"""
import tempfile

from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

path = tempfile.mkdtemp()
config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64)
LlamaForCausalLM(config).save_pretrained(path)
quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=True)
model = LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map={"": "cpu"})
quantized = [n for n, m in model.named_modules() if type(m).__name__ in ("Linear8bitLt", "Linear4bit")]
assert not quantized, f"not the branch in question: {len(quantized)} quantized Linear modules were loaded"
model.dequantize()
print("dequantize() with no quantized Linear returned; q_proj is", type(model.model.layers[0].self_attn.q_proj).__name__)
