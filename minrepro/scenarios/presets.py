"""The seeds' scenarios as presets, the memory budgets they use per scale, and what the seeds (and the
measurements since) say each preset does (`SEED_REPORTS`), so a table can say "as expected" or "differs"."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .spec import BROAD_TARGETS, AdapterSpec, MachineSpec, PeftCallSpec, PlacementSpec, QuantSpec, Scenario, scaled

GPU_SPLIT = {"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0}
# The CPU-only analogue must name two devices: from_pretrained records `hf_device_map` (which makes PEFT
# redispatch) only for a multi-device map, and on CPU the other device is disk. Towers or quantized layers
# on disk fail at load ("... is on the meta device"); the tied, unquantized lm_head loads. Note what this
# analogue cannot reach: with a cpu entry transformers' 4-bit quantizer leaves every cpu-mapped module
# unquantized (llm_int8_enable_fp32_cpu_offload), so no offloaded Linear4bit exists on a CPU-only box.
CPU_SPLIT = {"": "cpu", "lm_head": "disk"}
CPU_PEFT_SPLIT = {"": "cpu", "base_model.model.lm_head": "disk"}

# PEFT redispatch budgets, written into the rendering as explicit `max_memory` dicts. A spec names a budget
# ("BUDGET:spill"), so that the same intent survives a change of scale (jump_to_tiny) or of device. Keys:
# (device, scale); a missing entry means the budget has no meaning there (the preset is not offered).
#   gpu-short  GPU short, RAM plenty: blocks after the first that does not fit go to cpu (offload hooks on
#              cpu entries, no disk)
#   spill      GPU and RAM both short: cpu *and* disk entries (the seeds' consumer box)
#   all-disk   RAM shorter still: everything PEFT places goes to disk
BUDGETS: dict[str, dict[tuple[str, str], dict[Any, str]]] = {
    "gpu-short": {
        ("cuda", "e2b"): {0: "1GiB", "cpu": "100GiB"},
        ("cuda", "e4b"): {0: "1GiB", "cpu": "100GiB"},
        ("cuda", "tiny"): {0: "1MB", "cpu": "100GiB"},
    },
    "spill": {
        ("cuda", "e2b"): {0: "1GiB", "cpu": "6GiB"},
        ("cuda", "e4b"): {0: "1GiB", "cpu": "8GiB"},
        ("cuda", "tiny"): {0: "1MB", "cpu": "3MB"},
        ("cpu", "tiny"): {"cpu": "3MB"},
        ("cpu", "e2b"): {"cpu": "6GiB"},
        ("cpu", "e4b"): {"cpu": "8GiB"},
    },
    "all-disk": {
        ("cuda", "e2b"): {0: "1GiB", "cpu": "2GiB"},
        ("cuda", "e4b"): {0: "1GiB", "cpu": "3GiB"},
        ("cuda", "tiny"): {0: "1MB", "cpu": "2MB"},
        ("cpu", "tiny"): {"cpu": "2MB"},
    },
}
BUDGET_PREFIX = "BUDGET:"
# A consumer box (what the seeds' reporter ran): a 16 GB card, with plenty of RAM or 16 GB of it. PEFT then
# infers its redispatch budget itself (get_balanced_memory). Only at real scale: at tiny dimensions the
# process itself is larger than any budget that would make the model spill.
BOXES = {
    "box-16g-gpu": MachineSpec(gpu_gib=16.0),
    "box-16g-gpu-16g-ram": MachineSpec(gpu_gib=16.0, ram_gib=16.0),
    "box-16g-gpu-8g-ram": MachineSpec(gpu_gib=16.0, ram_gib=8.0),
}


def resolve_budget(name: str, device: str, scale: str | None) -> dict[Any, str] | None:
    """The explicit max_memory dict a named budget stands for on this device and scale (None: not defined)."""
    return BUDGETS.get(name, {}).get((device, scale or "tiny"))


def presets(device: str, scale: str = "tiny") -> dict[str, Scenario]:
    """The seeds' scenarios at a scale; `device` "cuda" gives their GPU/CPU layouts, "cpu" the CPU-only
    analogues. Presets whose budgets have no meaning on this device and scale are left out."""
    gpu = device == "cuda"
    split = GPU_SPLIT if gpu else CPU_SPLIT
    peft_split = GPU_SPLIT if gpu else CPU_PEFT_SPLIT
    whole = {"": 0} if gpu else "cpu"
    offload = {"offload_dir": "OFFLOAD"}
    at_split = PlacementSpec(split, offload_folder=True)
    no_dq = QuantSpec(double_quant=False)

    def budget(name: str, quant: QuantSpec = QuantSpec()) -> Scenario | None:  # noqa: B008 (a frozen value)
        if resolve_budget(name, device, scale) is None:
            return None
        return Scenario(
            f"r03-peft-{name}",
            quant=quant,
            placement=at_split,
            peft=PeftCallSpec(kwargs={**offload, "max_memory": BUDGET_PREFIX + name}),
        )

    found: dict[str, Scenario | None] = {
        "r05-all-gpu": Scenario("r05-all-gpu", placement=PlacementSpec(whole)),
        "r03-split": Scenario("r03-split", placement=at_split, peft=PeftCallSpec(kwargs=offload)),
        "r03-split-no-dq": Scenario(
            "r03-split-no-dq", quant=no_dq, placement=at_split, peft=PeftCallSpec(kwargs=offload)
        ),
        "r03-peft-gpu-short": budget("gpu-short"),
        "r03-peft-spill": budget("spill"),
        "r03-peft-spill-no-dq": replace(budget("spill", no_dq), name="r03-peft-spill-no-dq")
        if budget("spill")
        else None,
        "r03-peft-all-disk": budget("all-disk"),
        **{
            f"r03-{box}": (
                Scenario(f"r03-{box}", placement=at_split, peft=PeftCallSpec(kwargs=offload), machine=spec)
                if gpu and scale != "tiny"
                else None
            )
            for box, spec in BOXES.items()
        },
        "r06-peft-device-map": Scenario(
            "r06-peft-device-map", placement=at_split, peft=PeftCallSpec(kwargs={"device_map": peft_split, **offload})
        ),
        "broad-targets": Scenario(
            "broad-targets",
            placement=PlacementSpec(whole),
            adapter=AdapterSpec(targets=BROAD_TARGETS),
            action="forward",
        ),
        "merge-parity": Scenario("merge-parity", placement=PlacementSpec(whole), action="parity"),
        # the seeds' control for F: the same merge into a bf16 base (its error is the floor the check can see)
        "merge-parity-bf16": Scenario("merge-parity-bf16", quant=None, placement=PlacementSpec(whole), action="parity"),
        "dequantize-merge": Scenario("dequantize-merge", placement=PlacementSpec(whole), action="dequantize_merge"),
    }
    return {name: scaled(spec, scale) for name, spec in found.items() if spec is not None}


# --- what the seeds reported, per preset --------------------------------------------------------------


@dataclass(frozen=True)
class SeedReport:
    """What the seeds (and the measurements since) say a preset does. `expect` maps "set", "set/scale" or
    "set/scale/device" to a regex over the failure headline, or "pass"; `case` is the catalog case of the same
    family. With `needs_offloaded_quantized`, the failure is expected only where PEFT's redispatch put quantized
    layers under offload hooks (the trace says whether it did); elsewhere the branch is not reached, so "pass"."""

    source: str
    family: str
    case: str | None
    expect: dict[str, str]
    needs_offloaded_quantized: bool = False

    def expected(self, set_name: str, scale: str, device: str = "cuda") -> str | None:
        for key in (f"{set_name}/{scale}/{device}", f"{set_name}/{scale}", set_name):
            if key in self.expect:
                return self.expect[key]
        return None


SETS = ("pinned", "reporter", "newest")
_B = r"Params4bit\.__new__\(\) got an unexpected keyword argument '_is_hf_initialized'"
_A = r"Tensor\.item\(\) cannot be called on meta tensors"
_R03 = {"pinned": _B, "reporter": _A, "newest": _A}
_R03_NO_DQ = {"pinned": _B, "reporter": "pass", "newest": "pass"}
_R03_SOURCE = "seed R03 (split + PeftModel.from_pretrained); B fixed in accelerate 1.14, then A"
SEED_REPORTS: dict[str, SeedReport] = {
    "r05-all-gpu": SeedReport("seed R05 (everything on GPU)", "-", None, {s: "pass" for s in SETS}),
    **{
        name: SeedReport(_R03_SOURCE, "B, A", "quant-state-meta-item", _R03, needs_offloaded_quantized=True)
        for name in ("r03-split", "r03-peft-gpu-short", "r03-peft-spill", *(f"r03-{box}" for box in BOXES))
    },
    **{
        name: SeedReport(
            _R03_SOURCE + "; A needs double quant",
            "B",
            "params4bit-hf-initialized",
            _R03_NO_DQ,
            needs_offloaded_quantized=True,
        )
        for name in ("r03-split-no-dq", "r03-peft-spill-no-dq")
    },
    "r03-peft-all-disk": SeedReport(
        "the E4B measurements with everything on disk: a refusal, then family U",
        "-",
        None,
        {
            "pinned": "offload the whole model to the disk",
            "reporter": "offload the whole model to the disk",
            "newest": r"FileNotFoundError.*index\.json",
        },
    ),
    "r06-peft-device-map": SeedReport(
        "seed R06 (PEFT device_map); C fixed in transformers 5.23",
        "C",
        "gemma4-shared-kv-keyerror",
        {
            "pinned": r"^KeyError: \d+$",
            "pinned/e2b": r"^KeyError: 13$",
            "pinned/e4b": r"^KeyError: 22$",
            "reporter": r"^KeyError: \d+$",
            "reporter/e2b": r"^KeyError: 13$",
            "reporter/e4b": r"^KeyError: 22$",
            "newest": "pass",
        },
    ),
    "broad-targets": SeedReport(
        "seeds: broad target list",
        "D",
        "gemma4-clippable-linear-target",
        {s: r"Target module Gemma4ClippableLinear\(" for s in SETS},
    ),
    "merge-parity": SeedReport(
        "seeds: merge into 4-bit", "F", "lora-4bit-merge-parity", {s: "diverges from the adapter output" for s in SETS}
    ),
    "merge-parity-bf16": SeedReport(
        "seeds: the same merge into bf16 matches", "F (control)", None, {s: "pass" for s in SETS}
    ),
    "dequantize-merge": SeedReport(
        "seeds: dequantize() then merge",
        "G",
        "dequantize-merge-quant-state",
        {s: r"has no attribute 'quant_state'" for s in SETS},
    ),
}
