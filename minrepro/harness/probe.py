"""What an interpreter has: library versions, CUDA and the GPU, CPU flags (asked in a subprocess of it)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from ..errors import MinreproError
from .bytecode import child_environ
from .runner import resolve_python

# The libraries under test: the one definition every part of minrepro reads (the catalog's families cross them)
UNDER_TEST = ("torch", "transformers", "accelerate", "peft", "bitsandbytes")
HF_STACK = frozenset(UNDER_TEST) - {"torch"}  # what a version set pins; torch is the machine's
DISTRIBUTIONS = (*UNDER_TEST, "tokenizers")  # what a probe reports: tokenizers too, which transformers pins

# Runs under the target interpreter: versions come from metadata; CUDA needs the torch import.
_PROBE = rf"""
import json, platform, importlib.metadata as md
out = {{"python": platform.python_version(), "versions": {{}}, "cuda": False, "gpu": None, "gpus": 0,
       "cpu_flags": []}}
for dist in {DISTRIBUTIONS!r}:
    try:
        out["versions"][dist] = md.version(dist)
    except md.PackageNotFoundError:
        out["versions"][dist] = None
try:
    import torch
    out["cuda"] = bool(torch.cuda.is_available())
    out["gpu"] = torch.cuda.get_device_name(0) if out["cuda"] else None
    out["gpus"] = torch.cuda.device_count() if out["cuda"] else 0
except Exception as exc:
    out["torch_error"] = repr(exc)
try:
    flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags"))
    out["cpu_flags"] = sorted(set(flags.split(":", 1)[1].split()))
except Exception:
    pass
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Environment:
    python: str
    python_version: str
    versions: dict[str, str | None]
    cuda: bool
    gpu: str | None
    cpu_flags: tuple[str, ...] | None  # None: not known (a results document recorded without them)
    gpus: int | None = 0  # CUDA devices visible; None: not known (a results document recorded without it)

    @property
    def machine(self) -> str:
        return "cuda" if self.cuda else "cpu"

    @property
    def label(self) -> str:
        """The machine as the matrix, a report and a kit name it: "2 x NVIDIA H100 80GB HBM3", or "CPU only"."""
        if not self.cuda:
            return "CPU only"
        return f"{self.gpus} x {self.gpu}" if self.gpus else str(self.gpu)

    @classmethod
    def recorded(cls, document: dict[str, Any]) -> Environment:
        """The environment a results document was recorded in (what `skip_reason` needs of it)."""
        return cls(
            document.get("python", ""),
            document.get("python", ""),
            document.get("versions", {}),
            document["machine"] == "cuda",
            document.get("gpu"),
            tuple(document["cpu_flags"]) if "cpu_flags" in document else None,
            document.get("gpus", None if document["machine"] == "cuda" else 0),
        )


def probe(python: str | None) -> Environment:
    """What the target interpreter has: library versions, CUDA, CPU flags."""
    interpreter = resolve_python(python)
    environ = child_environ(os.environ, interpreter)
    proc = subprocess.run([interpreter, "-c", _PROBE], capture_output=True, text=True, timeout=300, env=environ)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise MinreproError(f"cannot probe {interpreter}: {last}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return Environment(
        interpreter, data["python"], data["versions"], data["cuda"], data["gpu"], tuple(data["cpu_flags"]), data["gpus"]
    )
