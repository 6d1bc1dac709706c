#!/usr/bin/env python
"""Chat server warm-up on a low-memory box: a 4-bit Llama plus the customer's LoRA, paged to disk when RAM is short.

We ship a tiny random checkpoint and adapter for the smoke test; production points --checkpoint/--adapter at
the real ones. Usage: python lowmem_chat_server.py --disk-layers 1 --prompts "hi" "hello there"
"""
import argparse
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from accelerate import dispatch_model
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("chat-server")


@dataclass
class ServerSettings:
    hidden: int = 64
    layers: int = 3
    heads: int = 4
    vocab: int = 256
    max_new_tokens: int = 4
    disk_layers: int = 1
    lora_rank: int = 8
    quant_type: str = "nf4"
    double_quant: bool = True
    prompts: List[str] = field(default_factory=lambda: ["hi"])
    checkpoint: Optional[str] = None
    adapter: Optional[str] = None


class Timer:
    def __init__(self, label):
        self.label = label

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        log.info("%s took %.2fs", self.label, time.perf_counter() - self.start)
        return False


def parse_args(argv=None) -> ServerSettings:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--disk-layers", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--prompts", nargs="*", default=["hi", "hello there"])
    parser.add_argument("--no-double-quant", action="store_true")
    args = parser.parse_args(argv)
    return ServerSettings(disk_layers=args.disk_layers, max_new_tokens=args.max_new_tokens,
                          checkpoint=args.checkpoint, adapter=args.adapter, prompts=args.prompts,
                          double_quant=not args.no_double_quant)


def make_smoke_checkpoint(settings: ServerSettings, root: str) -> str:
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=settings.hidden, intermediate_size=settings.hidden * 2,
                         num_hidden_layers=settings.layers, num_attention_heads=settings.heads,
                         num_key_value_heads=settings.heads, vocab_size=settings.vocab)
    path = os.path.join(root, "smoke-ckpt")
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def make_smoke_adapter(path: str, settings: ServerSettings, root: str) -> str:
    base = LlamaForCausalLM.from_pretrained(path)
    lora = LoraConfig(r=settings.lora_rank, lora_alpha=2 * settings.lora_rank, target_modules=["q_proj", "v_proj"])
    adapter_path = os.path.join(root, "smoke-adapter")
    get_peft_model(base, lora).save_pretrained(adapter_path)
    return adapter_path


def plan_device_map(settings: ServerSettings) -> dict:
    """Everything on cpu except the last `disk_layers` decoder blocks, which we page from disk."""
    device_map = {"model.embed_tokens": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    for i in range(settings.layers):
        device_map[f"model.layers.{i}"] = "disk" if i >= settings.layers - settings.disk_layers else "cpu"
    return device_map


def load_for_serving(path: str, adapter: str, settings: ServerSettings, offload_dir: str):
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=settings.quant_type,
                               bnb_4bit_use_double_quant=settings.double_quant,
                               bnb_4bit_compute_dtype=torch.float32)
    with Timer("load base"):
        base = LlamaForCausalLM.from_pretrained(path, quantization_config=quant, device_map={"": "cpu"})
    with Timer("page to disk"):
        # from_pretrained keeps offloaded blocks unquantized; page the quantized ones ourselves
        base = dispatch_model(base, device_map=plan_device_map(settings), offload_dir=offload_dir)
    with Timer("load adapter"):
        model = PeftModel.from_pretrained(base, adapter)
    return model.eval()


def fake_tokenize(prompt: str, vocab: int) -> torch.Tensor:
    return torch.tensor([[3 + (ord(ch) % (vocab - 3)) for ch in prompt]])


def warm_up(model, settings: ServerSettings) -> dict:
    replies = {}
    for prompt in settings.prompts:
        ids = fake_tokenize(prompt, settings.vocab)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=settings.max_new_tokens, do_sample=False)
        replies[prompt] = out[0, ids.shape[1]:].tolist()
    return replies


def report_health(replies: dict) -> None:
    bad = [p for p, toks in replies.items() if not toks]
    if bad:
        log.error("empty replies for %s", bad)
    print(f"warm-up ok: {len(replies)} prompts")


def main(argv=None) -> int:
    settings = parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="chat-server-")
    try:
        path = settings.checkpoint or make_smoke_checkpoint(settings, workdir)
        adapter = settings.adapter or make_smoke_adapter(path, settings, workdir)
        model = load_for_serving(path, adapter, settings, os.path.join(workdir, "offload"))
        replies = warm_up(model, settings)
        report_health(replies)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
