"""Findings withdrawn: the harness's own error, not a library's. An oracle the rendering got wrong, or a crash in one of
this project's patches that an exploration applied. A report records the harness fixes it ran with
(`harness_fixes`); a group of a report without a fix, that the fix's predicate covers, is withdrawn. Reports made
after the fix are judged as they are."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

WITHDRAWN = "withdrawn:"  # the prefix the README's explore table gives such a group


@dataclass(frozen=True)
class HarnessFix:
    id: str
    oracle: str  # the oracle that spoke wrongly
    covers: Callable[[dict, dict], bool]  # (group, report): the group is what the fix removed
    why: str


HARNESS_FIXES = (
    HarnessFix(
        "round-trip-of-a-new-adapter",
        "round-trip",
        lambda group, report: _spec(group)["peft"]["call"] != "from_pretrained",
        "the adapter round trip of a get_peft_model adapter compared what was saved with the checkpoint's other, "
        "random adapter (fixed 2026-11-24: it compares with the adapter the model held before any dispatch)",
    ),
    HarnessFix(
        "merge-parity-patch-dtype",
        "library error",
        lambda group, report: (
            _spec(group)["action"] == "parity"
            and "to have the same dtype" in group["headline"]
            and any("lora-4bit-merge-parity" in p for p in report.get("patches") or ())
        ),
        "F's patch (merge_and_unload(dequantize=True)) returned a float32 nn.Linear for a bf16 model with a "
        "float32 compute dtype, and the merged model crashed at its next layer (fixed 2026-11-24: the layer "
        "keeps the 4-bit layer's dtype contract)",
    ),
    HarnessFix(
        "placement-reference-inputs",
        "library error",
        lambda group, report: (
            _spec(group)["action"] == "placement"
            and _on_one_other_gpu(_spec(group))
            and "index is on cuda" in group["headline"]
        ),
        'a placement check of a load on one GPU other than cuda:0 (`{"": 1}`) made its ids on that GPU before '
        "the one-device reference, which is on cuda:0 (fixed 2026-11-23: each gets its own ids; "
        "tests/test_explore.py, witness one_device_map_placement)",
    ),
)


def _spec(group: dict) -> dict:
    return group.get("witness", {}).get("spec") or {"peft": {}, "action": None}


def _on_one_other_gpu(spec: dict) -> bool:
    """The load's map names a single GPU, not cuda:0 (`{"": 1}`)."""
    device_map = (spec.get("placement") or {}).get("device_map")
    devices = set(device_map.values()) if isinstance(device_map, dict) else set()
    return len(devices) == 1 and isinstance(gpu := devices.pop(), int) and gpu != 0


def withdrawn_of(group: dict, report: dict) -> str | None:
    """`withdrawn:<id>` when `group` of `report` is a harness error that report's rendering did not have fixed."""
    fixed = set(report.get("harness_fixes", ()))
    for fix in HARNESS_FIXES:
        if fix.id not in fixed and group["oracle"] == fix.oracle and fix.covers(group, report):
            return WITHDRAWN + fix.id
    return None
