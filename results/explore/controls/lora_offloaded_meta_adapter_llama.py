"""Control for family T on a model built through transformers (the benchmark script's tiny Llama, tied embeddings),
with layers 1 and 2 on disk: PEFT's LoRA on q_proj/v_proj (B = 0 at init, so the output must not change) against
the same model loaded whole. Prints which modules carry offloading hooks and where layer 1's adapter weights are,
so a pass says which branch it reached. Run: python this.py (in an env with or without peft's T patch)."""
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

root = tempfile.mkdtemp()
torch.manual_seed(1234)
LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=48, intermediate_size=96, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)).save_pretrained(root + "/base")
ids = torch.tensor([[5, 9, 11, 2]])
reference = LlamaForCausalLM.from_pretrained(root + "/base")(input_ids=ids).logits
placement = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.norm": "cpu", "lm_head": "cpu",
             "model.layers.0": "cpu", "model.layers.1": "disk", "model.layers.2": "disk"}
model = LlamaForCausalLM.from_pretrained(root + "/base", device_map=placement, offload_folder=root + "/pages")
model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
model.eval()
hooked = sorted({n.split(".layers.")[1].split(".")[0] for n, m in model.named_modules()
                 if ".layers." in n and getattr(getattr(m, "_hf_hook", None), "offload", False)})
adapter = model.base_model.model.model.layers[1].self_attn.q_proj.lora_A["default"].weight
logits = model(input_ids=ids).logits
print(f"layers with offloading hooks: {hooked}; layer 1's lora_A on {adapter.device}")
print(f"max |logits - reference| = {(logits - reference).abs().max().item():.3g}; NaN: {logits.isnan().any().item()}")
