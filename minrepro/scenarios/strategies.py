"""Hypothesis strategies over scenario specs: what `minrepro explore` searches.

The space is the one users wander through: towers, BitsAndBytesConfig fields (4-bit nf4/fp4, double quant,
INT8, compute dtype, fp32 CPU offload), placement (whole-device, `device_map="auto"` under a `max_memory` budget,
and dict maps that split at model, layer and sub-module level across the GPUs, cpu and disk), adapter rank and
targets, the PEFT call and its redispatch kwargs (`max_memory`, `device_map`, `offload_dir`) or the user's own
`dispatch_model` of the wrapped model (a map, or one inferred from a budget), and the action.
Budgets are drawn from per-scale ladders (a tiny model is a few MB; E2B is GBs) so that they split the model
rather than send it whole to one device: the blind spot that hid the seeds' primary failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from .spec import (
    ACTIONS,
    AUTO_MAPS,
    BROAD_TARGETS,
    SEEDS_INNER_LINEAR,
    AdapterSpec,
    ModelSpec,
    PeftCallSpec,
    PlacementSpec,
    QuantSpec,
    Scenario,
    scaled,
)

# max_memory ladders per scale: from "nothing fits" to "everything fits" on each side
BUDGET_LADDER = {
    "tiny": ["200KB", "1MB", "3MB", "8MB", "1GiB"],
    "e2b": ["1GiB", "3GiB", "6GiB", "12GiB", "100GiB"],
    "e4b": ["1GiB", "4GiB", "8GiB", "16GiB", "100GiB"],
}
TOWER_CHOICES = [(), ("vision",), ("audio",), ("vision", "audio")]
# the seeds' regex twice as often: plain name lists also hit the audio tower's clipped linears (family D, known)
TARGET_CHOICES: list[Any] = [
    SEEDS_INNER_LINEAR,
    SEEDS_INNER_LINEAR,
    ["q_proj", "v_proj"],
    ["o_proj", "down_proj"],
    BROAD_TARGETS,
]
SUBMODULES = ["", ".self_attn", ".mlp", ".self_attn.q_proj", ".mlp.down_proj"]
OTHER_MODULES = [
    "model.language_model.embed_tokens",
    "model.language_model.embed_tokens_per_layer",
    "model.language_model.norm",
    "lm_head",
]


def devices(device: str, gpus: int) -> list[Any]:
    """Where a module may go: the GPUs (by index, as users write maps), cpu, disk."""
    return [*range(gpus), "cpu", "disk"] if device == "cuda" else ["cpu", "disk"]


def module_paths(towers: tuple[str, ...], layers: int) -> list[str]:
    """Split points at model, layer and sub-module level (a tiny model's paths; scale keeps the names)."""
    paths = [f"model.language_model.layers.{i}{sub}" for i in range(layers) for sub in SUBMODULES]
    towers_paths = [f"model.{t}_tower" for t in towers] + [f"model.embed_{t}" for t in towers]
    return towers_paths + OTHER_MODULES + paths


@st.composite
def quants(draw: st.DrawFn) -> QuantSpec | None:
    kind = draw(st.sampled_from(["4bit", "4bit", "8bit", None]))
    if kind is None:
        return None
    # without llm_int8_enable_fp32_cpu_offload transformers refuses any cpu/disk entry beside a GPU: mostly on
    offload = draw(st.sampled_from([True, True, True, False]))
    if kind == "8bit":
        return QuantSpec(load_in_4bit=False, load_in_8bit=True, double_quant=False, fp32_cpu_offload=offload)
    return QuantSpec(
        quant_type=draw(st.sampled_from(["nf4", "fp4"])),
        double_quant=draw(st.booleans()),
        compute_dtype=draw(st.sampled_from(["bfloat16", "float16", "float32"])),
        fp32_cpu_offload=offload,
    )


def budgets(device: str, scale: str, gpus: int) -> st.SearchStrategy[dict[Any, str]]:
    """A max_memory dict: one entry per GPU and one for cpu (on a CPU box: cpu only, never a second cpu key)."""
    ladder = st.sampled_from(BUDGET_LADDER[scale])
    keys = [*range(gpus), "cpu"] if device == "cuda" else ["cpu"]
    return st.fixed_dictionaries({k: ladder for k in keys})


def homes(device: str, gpus: int) -> st.SearchStrategy[Any]:
    """The device a whole model, or a map's root entry, goes to."""
    return st.sampled_from([*range(gpus), "cpu"] if device == "cuda" else ["cpu"])


def whole(home: Any) -> PlacementSpec:
    """The whole model on one device, as users write it: `{"": gpu}`, or the string "cpu" (on a CPU box the one
    load that quantizes: transformers leaves cpu- and disk-mapped modules of a dict map unquantized)."""
    return PlacementSpec({"": home} if home != "cpu" else "cpu")


@dataclass(frozen=True)
class DrawnFor:
    """What a scenario's parts are drawn for: the device ("cuda" with `gpus` GPUs, or "cpu"), the scale, and the
    model's towers and text layers (its module names)."""

    device: str
    scale: str
    gpus: int
    towers: tuple[str, ...]
    layers: int


@st.composite
def placements(draw: st.DrawFn, drawn_for: DrawnFor) -> PlacementSpec:
    device, scale, gpus = drawn_for.device, drawn_for.scale, drawn_for.gpus
    towers, layers = drawn_for.towers, drawn_for.layers
    home = draw(homes(device, gpus))
    shape = draw(st.sampled_from(["whole", "auto", "split", "split", "split"]))
    if shape == "whole":
        return whole(home)
    if shape == "auto":
        return PlacementSpec(
            draw(st.sampled_from(AUTO_MAPS)), max_memory=draw(budgets(device, scale, gpus)), offload_folder=True
        )
    # disk in a base map mostly fails at load ("... is on the meta device"): rarer there, so that more runs get to
    # PEFT's redispatch, which is where the spilling happens
    where = [d for d in devices(device, gpus) if d != "disk"] * 2 + ["disk"]
    moves = draw(
        st.dictionaries(st.sampled_from(module_paths(towers, layers)), st.sampled_from(where), min_size=1, max_size=4)
    )
    device_map = {"": home, **moves}
    return PlacementSpec(device_map, offload_folder="disk" in moves.values() or draw(st.booleans()))


def peft_module_maps(device: str, towers: tuple[str, ...], layers: int, gpus: int) -> st.SearchStrategy[dict[str, Any]]:
    """A device_map over a PeftModel's module names (`base_model.model.` + the base's), whole home plus moves."""
    home = 0 if device == "cuda" else "cpu"
    moves = st.dictionaries(
        st.sampled_from(module_paths(towers, layers)), st.sampled_from(devices(device, gpus)), min_size=1, max_size=3
    )
    return moves.map(lambda m: {"": home, **{f"base_model.model.{k}": v for k, v in m.items()}})


@st.composite
def peft_calls(draw: st.DrawFn, drawn_for: DrawnFor) -> PeftCallSpec:
    device, scale, gpus = drawn_for.device, drawn_for.scale, drawn_for.gpus
    towers, layers = drawn_for.towers, drawn_for.layers
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return PeftCallSpec("get_peft_model")
    if kind == 1:  # the user offloads the LoRA-wrapped model themselves: accelerate's dispatch_model, map or budget
        if draw(st.booleans()):
            return PeftCallSpec("dispatch_model", {"max_memory": draw(budgets(device, scale, gpus))})
        return PeftCallSpec("dispatch_model", {"device_map": draw(peft_module_maps(device, towers, layers, gpus))})
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["offload_dir"] = "OFFLOAD"
    if draw(st.sampled_from([True, True, False])):  # PEFT's redispatch budget: what it infers the map from
        kwargs["max_memory"] = draw(budgets(device, scale, gpus))
    elif draw(st.integers(0, 3)) == 0:  # PEFT's own device_map, over the PeftModel's module names
        kwargs["device_map"] = draw(peft_module_maps(device, towers, layers, gpus))
        kwargs["offload_dir"] = "OFFLOAD"
    return PeftCallSpec("from_pretrained", kwargs)


@st.composite
def scenarios(draw: st.DrawFn, device: str, scale: str, gpus: int = 1) -> Scenario:
    """One scenario spec on `device` ("cuda" with `gpus` GPUs, or "cpu") at `scale` ("tiny", "e2b", "e4b")."""
    # at release scale a checkpoint (model and adapter) takes a minute to build: one model and one adapter there,
    # the search is over quantization, placement, PEFT's call and the action
    release = scale != "tiny"
    towers = ("vision", "audio") if release else draw(st.sampled_from(TOWER_CHOICES))
    layers = 4  # the tiny text model's layers; at E2B the same names exist (and 31 more)
    quant = draw(quants())
    action = draw(st.sampled_from(ACTIONS))
    if quant is None and action == "dequantize_merge":
        action = "merge"  # dequantize() on a model that was never quantized is refused, rightly
    # the checkpoint files check needs a checkpoint of its own: at tiny scale every run builds one
    checks = ("files",) if scale == "tiny" and draw(st.booleans()) else ()
    drawn_for = DrawnFor(device, scale, gpus, towers, layers)
    peft = draw(peft_calls(drawn_for))
    if action == "placement" and peft.call != "from_pretrained":
        action = "forward"  # the one-device reference loads the saved adapter: a fresh random LoRA is another model
    placement = draw(placements(drawn_for))
    if peft.call == "dispatch_model" and draw(st.sampled_from([True, True, True, False])):
        placement = whole(
            draw(homes(device, gpus))
        )  # who dispatches the wrapped model themselves mostly loaded it whole
    spec = Scenario(
        "explore",
        model=ModelSpec(towers=towers),
        quant=quant,
        placement=placement,
        adapter=AdapterSpec()
        if release
        else AdapterSpec(r=draw(st.sampled_from([1, 8, 16])), alpha=16, targets=draw(st.sampled_from(TARGET_CHOICES))),
        peft=peft,
        action=action,
        checks=checks,
    )
    return scaled(spec, scale)
