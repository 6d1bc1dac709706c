#!/usr/bin/env python
"""Evaluate a QLoRA checkpoint on the held-out split, then merge and export it for the CPU inference fleet.

The export is refused when the merged model's eval loss drifts from the adapter's: merging must not change
the model. Runs on CPU-only build machines. A tiny random Qwen2 stands in for the real checkpoint in CI.

    python eval_then_export.py --config job.json --export-dir ./exported
"""
import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import BitsAndBytesConfig, Qwen2Config, Qwen2ForCausalLM

DEFAULTS = {
    "model": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 200},
    "lora": {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj", "o_proj"]},
    "eval": {"batches": 3, "batch_size": 2, "seq_len": 12, "seed": 1234},
    "export": {"max_loss_drift": 1e-3, "dtype": "float32"},
}


def load_config(path):
    config = json.loads(json.dumps(DEFAULTS))
    if path:
        with open(path) as fh:
            for section, values in json.load(fh).items():
                config.setdefault(section, {}).update(values)
    return config


def heldout_batches(cfg, vocab_size):
    rng = random.Random(cfg["seed"])
    for _ in range(cfg["batches"]):
        rows = [[rng.randrange(3, vocab_size) for _ in range(cfg["seq_len"])] for _ in range(cfg["batch_size"])]
        yield torch.tensor(rows)


def build_checkpoint(model_cfg, root):
    torch.manual_seed(0)
    path = Path(root) / "base"
    Qwen2ForCausalLM(Qwen2Config(**model_cfg)).save_pretrained(path)
    return path


def load_qlora(path, lora_cfg):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.float32)
    base = Qwen2ForCausalLM.from_pretrained(path, quantization_config=quant, device_map={"": "cpu"})
    return get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", **lora_cfg))


def evaluate(model, batches):
    model.eval()
    losses = []
    with torch.no_grad():
        for ids in batches:
            losses.append(model(input_ids=ids, labels=ids).loss.item())
    return sum(losses) / len(losses)


def summarize(name, loss):
    ppl = math.exp(loss) if loss < 50 else float("inf")
    print(f"{name:>8}: loss {loss:.4f}  ppl {ppl:.2f}")
    return {"loss": loss, "ppl": ppl}


def export(model, export_dir, dtype):
    if export_dir is None:
        return None
    os.makedirs(export_dir, exist_ok=True)
    model.to(getattr(torch, dtype)).save_pretrained(export_dir)
    return export_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None, help="JSON overrides of DEFAULTS")
    parser.add_argument("--export-dir", default=None)
    parser.add_argument("--report", default=None, help="write the eval summary here")
    args = parser.parse_args(argv)
    config = load_config(args.config)

    with tempfile.TemporaryDirectory() as root:
        path = build_checkpoint(config["model"], root)
        model = load_qlora(path, config["lora"])
        vocab = config["model"]["vocab_size"]
        summary = {"adapter": summarize("adapter", evaluate(model, heldout_batches(config["eval"], vocab)))}
        merged = model.merge_and_unload()
        summary["merged"] = summarize("merged", evaluate(merged, heldout_batches(config["eval"], vocab)))
        drift = abs(summary["merged"]["loss"] - summary["adapter"]["loss"])
        if drift > config["export"]["max_loss_drift"]:
            raise RuntimeError(f"merged model's eval loss drifts by {drift:.4f}; refusing to export")
        export(merged, args.export_dir, config["export"]["dtype"])
    if args.report:
        Path(args.report).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
