#!/usr/bin/env python
"""Evaluate a LoRA adapter on Gemma 4 on a small box: the base is split across devices, the adapter is loaded
with a memory budget, and a few prompts are generated greedily. Prints a JSON summary per prompt."""
import argparse
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (BitsAndBytesConfig, Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration,
                          Gemma4TextConfig, Gemma4VisionConfig)

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("eval")

PROMPTS = [[2, 10, 11, 12], [2, 20, 21], [2, 30, 31, 32, 33]]


@dataclass
class EvalConfig:
    max_new_tokens: int = 4
    cpu_budget: str = "3MB"
    quantize: bool = True
    seed: int = 0
    report_every: int = 1


def tiny_gemma():
    text = Gemma4TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                            num_key_value_heads=1, head_dim=64, global_head_dim=64, hidden_size_per_layer_input=64,
                            vocab_size=128, vocab_size_per_layer_input=128, num_kv_shared_layers=2,
                            layer_types=["sliding_attention", "full_attention"] * 2)
    vision = Gemma4VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=32)
    audio = Gemma4AudioConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, output_proj_dims=64)
    return Gemma4Config(text_config=text, vision_config=vision, audio_config=audio)


def prepare_checkpoint(root):
    """What the training job leaves behind: a base checkpoint and an adapter for the language model."""
    torch.manual_seed(0)
    model = Gemma4ForConditionalGeneration(tiny_gemma())
    model.save_pretrained(os.path.join(root, "base"))
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=r".*language_model.*\.(q_proj|v_proj)", init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(os.path.join(root, "adapter"))
    return os.path.join(root, "base"), os.path.join(root, "adapter")


def load_for_eval(base_path, adapter_path, cfg):
    kwargs = {}
    if cfg.quantize:
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, llm_int8_enable_fp32_cpu_offload=True)
    base = Gemma4ForConditionalGeneration.from_pretrained(base_path, device_map={"": "cpu", "lm_head": "disk"},
                                                          offload_folder=tempfile.mkdtemp(), dtype=torch.bfloat16,
                                                          **kwargs)
    model = PeftModel.from_pretrained(base, adapter_path, offload_dir=tempfile.mkdtemp(),
                                      max_memory={"cpu": cfg.cpu_budget})
    log.info("adapter loaded; device map has %d entries", len(getattr(model, "hf_device_map", {}) or {}))
    return model


def retry(times=2, wait=0.1):
    """Generation on a loaded box sometimes hits a transient OOM; retry once before giving up."""
    def wrap(fn):
        def inner(*args, **kwargs):
            for attempt in range(times):
                try:
                    return fn(*args, **kwargs)
                except MemoryError:
                    log.warning("attempt %d ran out of memory", attempt)
                    time.sleep(wait)
            return fn(*args, **kwargs)
        return inner
    return wrap


@retry()
def evaluate(model, cfg):
    results = []
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([prompt])
        start = time.time()
        out = model.generate(input_ids=ids, max_new_tokens=cfg.max_new_tokens, do_sample=False)
        results.append({"prompt": i, "new_tokens": out.shape[1] - ids.shape[1], "seconds": round(time.time() - start, 2)})
        if i % cfg.report_every == 0:
            log.info("prompt %d done", i)
    return results


def write_results(results, path):
    with open(path, "w") as fh:
        for row in results:
            fh.write(json.dumps(row) + "\n")


def summarize(results):
    return {"prompts": len(results), "tokens": sum(r["new_tokens"] for r in results)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu-budget", default="3MB")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--no-quantize", action="store_true")
    args = parser.parse_args()
    cfg = EvalConfig(max_new_tokens=args.max_new_tokens, cpu_budget=args.cpu_budget, quantize=not args.no_quantize)
    root = tempfile.mkdtemp(prefix="eval-")
    base_path, adapter_path = prepare_checkpoint(root)
    model = load_for_eval(base_path, adapter_path, cfg)
    results = evaluate(model, cfg)
    if os.environ.get("EVAL_OUT"):
        write_results(results, os.environ["EVAL_OUT"])
    print(json.dumps(summarize(results)))


if __name__ == "__main__":
    main()
