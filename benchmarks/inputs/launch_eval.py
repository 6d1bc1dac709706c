"""Generation check of the adapter, written for `accelerate launch` (one process per device).

    accelerate launch --cpu --num_processes 1 launch_eval.py --tokens 2
"""
import argparse
import tempfile

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4ForCausalLM, Gemma4TextConfig


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    accelerator = Accelerator()
    set_seed(0)
    config = Gemma4TextConfig(
        vocab_size=128, vocab_size_per_layer_input=128, hidden_size=64, intermediate_size=128,
        num_hidden_layers=args.layers, num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=32,
        hidden_size_per_layer_input=16, num_kv_shared_layers=2, layer_types=["sliding_attention", "full_attention"] * 2,
    )
    root = tempfile.mkdtemp(prefix="launch-")
    if accelerator.is_main_process:
        get_peft_model(Gemma4ForCausalLM(config), LoraConfig(target_modules=["q_proj"])).save_pretrained(root)
    accelerator.wait_for_everyone()
    base = Gemma4ForCausalLM(config)
    base.hf_device_map = {"": str(accelerator.device)}
    model = PeftModel.from_pretrained(base, root, device_map={"": str(accelerator.device),
                                                              "base_model.model.lm_head": "disk"},
                                      offload_dir=root + "/offload")
    ids = torch.tensor([[1, 2, 3]], device=accelerator.device)
    out = model.generate(ids, max_new_tokens=args.tokens, do_sample=False)
    accelerator.print(out.tolist())


if __name__ == "__main__":
    main()
