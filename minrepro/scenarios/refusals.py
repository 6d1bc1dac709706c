"""Refusals by design: a library rejecting a configuration that its documentation calls unsupported. Explore draws
such configurations too (the check working is worth seeing), but they are not bugs: a failure is one only when the
spec did ask for what the check refuses, so the same message under a spec that did not is still a finding."""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Callable

from ..harness.signature import Signature

REFUSAL = "refusal:"  # the prefix a refusal's id carries where explore records what a failure is


@dataclass(frozen=True)
class Refusal:
    id: str
    message: str  # regex on the failure's final line
    owner: str  # regex, whole, on its owning library function
    asked: Callable[[dict], bool]  # the spec asked for what is refused
    why: str


def _quantized_without_fp32_offload(spec: dict) -> bool:
    quant = spec.get("quant")
    return bool(quant) and not quant.get("fp32_cpu_offload")


REFUSALS = (
    Refusal(
        "bnb-offload-without-fp32-cpu-offload",
        r"^ValueError: Some modules are dispatched on the CPU or the disk",
        r"transformers\.quantizers\.quantizer_bnb_(4|8)bit:Bnb(4|8)BitHfQuantizer\.validate_environment",
        _quantized_without_fp32_offload,
        "a quantized load with cpu or disk entries needs llm_int8_enable_fp32_cpu_offload=True (documented)",
    ),
    Refusal(
        "whole-model-on-disk",
        r"^ValueError: You are trying to offload the whole model to the disk",
        r"accelerate\.big_modeling:dispatch_model",
        lambda spec: True,
        "accelerate before 1.15 sends a whole model on disk to `disk_offload` (1.15 supports it: family U)",
    ),
)


def refusal_of(sig: Signature, headline: str, spec: dict) -> str | None:
    """`refusal:<id>` when the failure is a documented refusal of what `spec` asked for, else None."""
    owner = str(sig.owner) if sig.owner else ""
    for refusal in REFUSALS:
        if re.search(refusal.message, headline) and re.fullmatch(refusal.owner, owner) and refusal.asked(spec):
            return REFUSAL + refusal.id
    return None
