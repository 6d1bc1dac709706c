"""Explore's newest `indices ... (cuda:1)` row, one step down: does a Linear8bitLt moved by its *parent's* `.to()`
keep its 8-bit statistics on the old device?

PEFT's one-device redispatch ends in `model.to(device)` on the PeftModel. torch moves a child through `_apply`, never
through the child's own `.to()`, and keeps each Parameter object (it assigns `.data`): so `Int8Params.to`'s moved
`SCB` and `Linear8bitLt.to`'s moved state are both dropped. Each row: where the layer was quantized, how it was moved,
whether a forward ran before the move, the outlier threshold; then where its tensors are and what a forward on the
new device does.
Needs CUDA (two GPUs for the cuda:1 rows). Run with the bitsandbytes under test first on sys.path.
"""

from __future__ import annotations

import subprocess
import sys

import bitsandbytes as bnb
import torch

torch.manual_seed(0)
GPUS = torch.cuda.device_count()
MOVES = [("cuda:0", "cpu"), ("cpu", "cuda:0")] + ([("cuda:1", "cuda:0")] if GPUS > 1 else [])


def where(t: torch.Tensor | None) -> str:
    return "-" if t is None else str(t.device)


def run(src: str, dst: str, how: str, warm: bool, threshold: float) -> str:
    layer = bnb.nn.Linear8bitLt(64, 64, bias=False, has_fp16_weights=False, threshold=threshold)
    parent = torch.nn.Sequential(layer).to(torch.float16)
    layer.to(src)  # quantizes on src
    x = torch.randn(2, 64, dtype=torch.float16)
    x[:, 0] = (
        20  # an outlier column: with a threshold, the matmul indexes the weight's CB by it (transformers' default 6.0)
    )
    expected = layer(x.to(src)).float().cpu() if warm else None
    if how == "layer.to":
        layer.to(dst)
    else:
        parent.to(dst)
    state = layer.state
    placed = (
        f"weight {where(layer.weight)}, weight.CB {where(layer.weight.CB)}, weight.SCB {where(layer.weight.SCB)}, "
        f"state.CB {where(state.CB)}, state.SCB {where(state.SCB)}"
    )
    try:
        out = layer(x.to(dst)).float().cpu()
        verdict = "runs" if expected is None else f"runs, max diff {(out - expected).abs().max().item():.4f}"
    except Exception as error:  # the outcome is the row's data
        verdict = f"{type(error).__name__}: {str(error).splitlines()[0][:110]}"
    return f"{src:>6} -> {dst:<6} {how:<9} {'after' if warm else 'before':<6} {threshold:<4} | {placed} | {verdict}"


if len(sys.argv) == 6:  # one row, in its own process: an illegal memory access poisons the CUDA context for good
    src, dst, how, warm, threshold = sys.argv[1:]
    print(run(src, dst, how, warm == "after", float(threshold)), flush=True)
    sys.exit()
print(f"bitsandbytes {bnb.__version__} from {bnb.__file__}; torch {torch.__version__}; {GPUS} GPU(s)")
print("  from -> to     move by   forward thr. | tensors after the move | forward on the new device")
for src, dst in MOVES:
    for how in ("layer.to", "parent.to"):
        for warm in ("before", "after"):
            for threshold in ("0.0", "6.0"):
                row = subprocess.run(
                    [sys.executable, __file__, src, dst, how, warm, threshold],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                lines = (row.stdout.strip() or row.stderr.strip() or f"exit {row.returncode}").splitlines()
                print(
                    lines[0]
                    if row.returncode == 0
                    else f"{src:>6} -> {dst:<6} {how:<9} {warm:<6} {threshold:<4} | "
                    f"process died (exit {row.returncode}): {lines[-1][:110]}",
                    flush=True,
                )
