"""Smoke test for a LoRA adapter on an offloaded Gemma 4 text model, run before a long fine-tune.

    python adapter_smoke.py --hidden 64 --layers 4 --kv-shared 2 --target q_proj --offload lm_head=disk --new-tokens 2

Builds a random model of the given size (no download), saves it and a fresh adapter, loads both back the way the
training job does (the adapter with an offload map, as on the 16 GB card) and checks that the untrained adapter
leaves greedy generation unchanged.
"""
import argparse
import json
import logging
import os
import tempfile
import time

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

log = logging.getLogger("smoke")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--kv-shared", type=int, default=0)
    parser.add_argument("--target", action="append", required=True, help="LoRA target module (repeatable)")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--offload", action="append", default=[], metavar="MODULE=DEVICE")
    parser.add_argument("--new-tokens", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", help="write a JSON report here")
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args()


def build_config(args):
    return Gemma4TextConfig(
        vocab_size=128, vocab_size_per_layer_input=128, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=32,
        hidden_size_per_layer_input=16, num_kv_shared_layers=args.kv_shared,
        layer_types=["sliding_attention", "full_attention"] * (args.layers // 2),
    )


def offload_map(entries):
    mapping = {"": "cpu"}
    for entry in entries:
        module, _, device = entry.partition("=")
        mapping["base_model.model." + module] = device or "disk"
    return mapping


def save_checkpoints(config, args, root):
    model = get_peft_model(Gemma4ForCausalLM(config), LoraConfig(r=args.rank, target_modules=args.target))
    model.save_pretrained(os.path.join(root, "adapter"))
    Gemma4ForCausalLM(config).save_pretrained(os.path.join(root, "base"))


def main():
    args = parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    torch.manual_seed(args.seed)
    config = build_config(args)
    root = tempfile.mkdtemp(prefix="smoke-")
    started = time.time()
    save_checkpoints(config, args, root)
    base = Gemma4ForCausalLM.from_pretrained(os.path.join(root, "base"))
    base.hf_device_map = {"": "cpu"}  # the training job loads with device_map="auto": all on cpu on this box
    log.info("base loaded in %.1f s, map %s", time.time() - started, base.hf_device_map)
    prompt = torch.tensor([[1, 2, 3]])
    reference = base.generate(prompt, max_new_tokens=args.new_tokens, do_sample=False)
    model = PeftModel.from_pretrained(base, os.path.join(root, "adapter"), device_map=offload_map(args.offload),
                                      offload_dir=os.path.join(root, "offload"))
    model.eval()
    out = model.generate(prompt, max_new_tokens=args.new_tokens, do_sample=False)
    same = torch.equal(out, reference)
    if args.report:
        with open(args.report, "w") as fh:
            json.dump({"same": same, "seconds": time.time() - started}, fh)
    if not same:
        raise SystemExit(f"the untrained adapter changed generation: {out.tolist()} vs {reference.tolist()}")
    log.info("smoke test passed in %.1f s", time.time() - started)


if __name__ == "__main__":
    main()
