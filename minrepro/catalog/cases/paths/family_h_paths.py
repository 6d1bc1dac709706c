"""Family H reachability: the paths a user takes to a CPU eval forward of an offloaded 4-bit layer.

Not a catalog case (it tries several paths and prints one line each); run it in an environment, then
again after `minrepro patch apply ... bitsandbytes/quant-state-meta-copy` and after adding
`bitsandbytes/linear4bit-repack-rewrite`. Each path runs three no-grad eval forwards and prints the max
error against the same model run without offload and without the AVX512-BF16 repack.
"""
import tempfile

import bitsandbytes as bnb
import torch
from accelerate import cpu_offload, dispatch_model


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32), torch.nn.Linear(64, 64))
    return model.to("cpu").eval()  # quantizes


torch.manual_seed(1)
x = torch.randn(4, 64)
reference = build()
reference[0].support_avx512bf16_for_cpu = False
with torch.no_grad():
    want = reference(x)
paths = {
    "cpu_offload(execution_device=cpu)": lambda m: cpu_offload(m, execution_device="cpu"),
    "dispatch_model {0: disk, 1: cpu}": lambda m: dispatch_model(m, device_map={"0": "disk", "1": "cpu"},
                                                                 offload_dir=tempfile.mkdtemp()),
    "dispatch_model all disk, main_device=cpu": lambda m: dispatch_model(
        m, device_map={"0": "disk", "1": "disk"}, offload_dir=tempfile.mkdtemp(), main_device="cpu"),
    "no offload (control)": lambda m: m,
}
for name, offload in paths.items():
    try:
        model = offload(build())
        with torch.no_grad():
            errors = [(model(x) - want).abs().max().item() for _ in range(3)]
        verdict = "WRONG" if max(errors) > 0.05 else "ok"
        print(f"{name}: {verdict}, max error per forward {[round(e, 3) for e in errors]} (largest output {want.abs().max():.2f})")
    except Exception as exc:  # a crash on a path is its outcome
        print(f"{name}: {type(exc).__name__}: {str(exc)[:90]}")
