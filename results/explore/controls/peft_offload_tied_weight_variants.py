"""Control for family V: which branch a pass reached. (1) The lm_head-only variant (tied lm_head on disk, embeddings
on cpu) on a tiny Llama, with PEFT's default redispatch; (2) benchmarks/scripts/gemma_adapter_eval.py's own load
(tiny Gemma 4, 4-bit, {"": "cpu", "lm_head": "disk"}, PeftModel.from_pretrained under a 3MB cpu budget). For each:
whether lm_head carries an offloading hook after PEFT's redispatch, whether the rebuilt index holds its key, and the
greedy output's agreement with a one-device load (Llama) or that generation ran (Gemma 4). Run: python this.py."""
import importlib.util
import os
import sys
import tempfile

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM


def head_state(model):
    hook = getattr(model.base_model.model.lm_head, "_hf_hook", None)
    index = getattr(getattr(getattr(hook, "weights_map", None), "dataset", None), "index", {}) or {}
    return f"lm_head offloading hook: {bool(getattr(hook, 'offload', False))}; index holds its key: " \
           f"{'base_model.model.lm_head.weight' in index}"


root = tempfile.mkdtemp()
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, tie_word_embeddings=True)
model = LlamaForCausalLM(config)
model.save_pretrained(root + "/base")
get_peft_model(model, LoraConfig(target_modules=["q_proj"], init_lora_weights=False)).save_pretrained(root + "/ad")
ids = torch.tensor([[1, 2, 3]])
reference = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(root + "/base"), root + "/ad")(input_ids=ids).logits
base = LlamaForCausalLM.from_pretrained(root + "/base", device_map={"": "cpu", "lm_head": "disk"},
                                        offload_folder=root + "/off")
try:
    llama = PeftModel.from_pretrained(base, root + "/ad", offload_dir=root + "/off-peft", max_memory={"cpu": "3MB"})
    error = (llama(input_ids=ids).logits - reference).abs().max().item()
    print(f"llama, lm_head only on disk: {head_state(llama)}; max |logits - reference| = {error:.3g}")
except Exception as exc:
    print(f"llama, lm_head only on disk: {type(exc).__name__}: {exc}")

script = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks", "scripts", "gemma_adapter_eval.py")
spec = importlib.util.spec_from_file_location("gemma_adapter_eval", script)
bench = importlib.util.module_from_spec(spec)
sys.modules["gemma_adapter_eval"] = bench
spec.loader.exec_module(bench)
try:
    gemma = bench.load_for_eval(*bench.prepare_checkpoint(tempfile.mkdtemp()), bench.EvalConfig())
    state = head_state(gemma)
    print(f"gemma_adapter_eval: {state}; generated {bench.summarize(bench.evaluate(gemma, bench.EvalConfig()))}")
except Exception as exc:
    print(f"gemma_adapter_eval: {type(exc).__name__}: {exc}")
