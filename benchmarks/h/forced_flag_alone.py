"""Family H's patch and the forced repack flag: one Linear4bit, no write-back, no patch, two no-grad
forwards, with bitsandbytes' own `support_avx512bf16_for_cpu` and with it forced on. As a CPU without AVX512-BF16
runs it: `MINREPRO_EMULATE_ABSENT=avx512_bf16 PY minrepro/harness/_bootstrap.py benchmarks/h/forced_flag_alone.py`."""

import bitsandbytes as bnb
import torch
from bitsandbytes.functional import has_avx512bf16

torch.manual_seed(0)
reference, x = torch.nn.Linear(64, 64), torch.randn(4, 64)


def layer(flag: bool | None) -> bnb.nn.Linear4bit:
    lin = bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32)
    lin.load_state_dict(reference.state_dict())
    lin = lin.to("cpu").eval()  # quantizes
    if flag is not None:
        lin.support_avx512bf16_for_cpu = flag
    return lin


print(f"has_avx512bf16(): {bool(has_avx512bf16())}")
with torch.no_grad():
    expected = layer(False)(x)
    for flag in (None, True):
        lin = layer(flag)
        errors = [round((lin(x) - expected).abs().max().item(), 3) for _ in range(2)]
        repacked = getattr(lin.weight.quant_state, "packing_format_for_cpu", False)
        print(
            f"flag {'own choice' if flag is None else 'forced on'}: repacked={repacked}, "
            f"max error of 2 forwards: {errors}"
        )
