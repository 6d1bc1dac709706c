#!/usr/bin/env python
"""Turn a bitsandbytes-loaded checkpoint back into plain weights for the serving fleet (ONNX/TGI want fp16/fp32).

The build box has no GPU, so the checkpoint is loaded with its quantization config on cpu (8-bit with fp32 cpu
offload, as the training box wrote it), sanity-checked on a few prompts, dequantized, compared against the
quantized logits, and saved with a small manifest. A tiny random Qwen2 stands in for the real checkpoint in CI.

    python export_for_serving.py --out ./serving --dtype float32 --prompts 3
"""
import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import BitsAndBytesConfig, Qwen2Config, Qwen2ForCausalLM

log = logging.getLogger("export")


@dataclass
class ExportJob:
    out: str | None = None
    dtype: str = "float32"
    prompts: int = 3
    prompt_len: int = 8
    max_abs_logit_diff: float = 0.5
    source: str | None = None
    tags: list = field(default_factory=lambda: ["ci", "cpu-build"])


def parse_args(argv=None) -> ExportJob:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="where the plain checkpoint goes (default: a temp dir)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--source", default=None, help="a quantized checkpoint (default: a tiny random one)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    return ExportJob(out=args.out, dtype=args.dtype, prompts=args.prompts, source=args.source)


def tiny_checkpoint(root: Path) -> Path:
    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    path = root / "source"
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def load_quantized(path: Path) -> Qwen2ForCausalLM:
    quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=True)
    started = time.perf_counter()
    model = Qwen2ForCausalLM.from_pretrained(path, quantization_config=quant, device_map={"": "cpu"})
    log.info("loaded %s in %.1f s", path.name, time.perf_counter() - started)
    return model.eval()


def sample_prompts(job: ExportJob, vocab: int) -> list:
    generator = torch.Generator().manual_seed(1234)
    return [torch.randint(3, vocab, (1, job.prompt_len), generator=generator) for _ in range(job.prompts)]


@torch.no_grad()
def logits_for(model, prompts) -> list:
    return [model(input_ids=ids).logits.float() for ids in prompts]


def write_manifest(out: Path, job: ExportJob, diffs: list) -> None:
    manifest = {"job": asdict(job), "max_abs_logit_diff": max(diffs) if diffs else None, "files": []}
    manifest["files"] = sorted(p.name for p in out.iterdir())
    (out / "export.json").write_text(json.dumps(manifest, indent=2))


def main(argv=None) -> int:
    job = parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        source = Path(job.source) if job.source else tiny_checkpoint(root)
        model = load_quantized(source)
        prompts = sample_prompts(job, model.config.vocab_size)
        before = logits_for(model, prompts)
        log.debug("quantized logits: %s", [tuple(t.shape) for t in before])
        model = model.dequantize(dtype=getattr(torch, job.dtype))
        after = logits_for(model, prompts)
        diffs = [(a - b).abs().max().item() for a, b in zip(after, before)]
        if max(diffs) > job.max_abs_logit_diff:
            log.error("dequantized logits drift by %.3f", max(diffs))
            return 1
        out = Path(job.out) if job.out else root / "serving"
        model.save_pretrained(out)
        write_manifest(out, job, diffs)
        log.info("exported to %s (%d files)", out, len(list(out.iterdir())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
