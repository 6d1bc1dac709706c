"""Scenario specs: a small, typed, serializable description of a real Gemma 4 + bitsandbytes + PEFT setup.
`render` turns one into a standalone script that builds a random checkpoint and adapter and runs one action;
`passes` proposes simpler specs; `presets` holds the seeds' scenarios.

A spec either describes Gemma 4 (`model.kind == "gemma4"`) or one of the toys that stand in for it once
the bug is known to live below the model: a stack of `Linear4bit` layers dispatched with accelerate's raw
`dispatch_model` (families A, B), a `Gemma4ClippableLinear`-shaped wrapper (D), a shared-KV toy (C).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

# Real text dimensions of the released checkpoints (NOTES; the class defaults are not these).
E2B_TEXT = dict(
    hidden_size=1536,
    intermediate_size=6144,
    num_hidden_layers=35,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=256,
    global_head_dim=512,
    sliding_window=512,
    hidden_size_per_layer_input=256,
    vocab_size=262144,
    vocab_size_per_layer_input=262144,
    final_logit_softcapping=30.0,
    num_kv_shared_layers=20,
    use_double_wide_mlp=True,
    layer_types=["sliding_attention"] * 4 + ["full_attention"],
    layer_repeat=7,
)
E4B_TEXT = dict(
    E2B_TEXT,
    hidden_size=2560,
    intermediate_size=10240,
    num_hidden_layers=42,
    num_key_value_heads=2,
    num_kv_shared_layers=18,
    layer_types=["sliding_attention"] * 5 + ["full_attention"],
    layer_repeat=7,
)
TINY_TEXT = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    global_head_dim=64,
    sliding_window=512,
    hidden_size_per_layer_input=64,
    vocab_size=128,
    vocab_size_per_layer_input=128,
    final_logit_softcapping=30.0,
    num_kv_shared_layers=2,
    use_double_wide_mlp=False,
    layer_types=["sliding_attention", "full_attention"],
    layer_repeat=2,
)
VISION = {
    "e2b": dict(
        hidden_size=768,
        intermediate_size=3072,
        num_hidden_layers=16,
        num_attention_heads=12,
        num_key_value_heads=12,
        head_dim=64,
        use_clipped_linears=False,
    ),
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        use_clipped_linears=False,
    ),
}
AUDIO = {
    "e2b": dict(
        hidden_size=1024, num_hidden_layers=12, num_attention_heads=8, use_clipped_linears=True, output_proj_dims=1536
    ),
    "tiny": dict(
        hidden_size=64, num_hidden_layers=1, num_attention_heads=2, use_clipped_linears=True, output_proj_dims=64
    ),
}
SEEDS_INNER_LINEAR = (
    r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
    r"|.*(vision_tower|audio_tower).*\.(q_proj|k_proj|v_proj|o_proj)\.linear"
)
BROAD_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ACTIONS = (
    "forward",
    "generate",
    "merge",
    "dequantize_merge",
    "parity",
    "forward_labels",
    "train_step",
    "save_load",
    "placement",
)
AUTO_MAPS = ("auto", "balanced", "sequential")  # device_map strings for which accelerate infers the map itself
CHECKS = ("files",)  # oracles a rendering can add around any action: "files" = the checkpoint is never rewritten
TOYS = ("linear4bit_dispatch", "clippable_wrapper", "shared_kv")


@dataclass(frozen=True)
class ModelSpec:
    kind: str = "gemma4"  # "gemma4" or one of TOYS
    text: dict[str, Any] = field(default_factory=lambda: dict(TINY_TEXT))
    towers: tuple[str, ...] = ("vision", "audio")
    tower_scale: str = "tiny"  # "e2b" | "tiny"


@dataclass(frozen=True)
class QuantSpec:
    load_in_4bit: bool = True  # False with load_in_8bit: bnb INT8 (Linear8bitLt)
    load_in_8bit: bool = False
    quant_type: str = "nf4"
    double_quant: bool = True
    compute_dtype: str = "bfloat16"
    fp32_cpu_offload: bool = True  # llm_int8_enable_fp32_cpu_offload: required for cpu entries on a GPU


@dataclass(frozen=True)
class PlacementSpec:
    device_map: dict[str, Any] | str = "cpu"
    max_memory: dict[str, str] | None = None
    offload_folder: bool = False


@dataclass(frozen=True)
class MachineSpec:
    """What the machine reports to accelerate's `get_max_memory` (the budgets PEFT's redispatch infers when it is
    given none): `gpu_gib` free on the GPU when the script starts, `ram_gib` of RAM available to it. The rendering
    makes the box look so: a ballast tensor takes the rest of the GPU, and psutil reports `ram_gib` less what the
    process has grown by since. None leaves that side as the box has it."""

    gpu_gib: float | None = None
    ram_gib: float | None = None


@dataclass(frozen=True)
class AdapterSpec:
    r: int = 8
    alpha: int = 16
    targets: str | list[str] = SEEDS_INNER_LINEAR


@dataclass(frozen=True)
class PeftCallSpec:
    call: str = "from_pretrained"  # "from_pretrained" | "get_peft_model" | "dispatch_model"
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    model: ModelSpec = field(default_factory=ModelSpec)
    quant: QuantSpec | None = field(default_factory=QuantSpec)
    placement: PlacementSpec = field(default_factory=PlacementSpec)
    adapter: AdapterSpec = field(default_factory=AdapterSpec)
    peft: PeftCallSpec = field(default_factory=PeftCallSpec)
    action: str = "generate"
    machine: MachineSpec | None = None
    checks: tuple[str, ...] = ()  # of CHECKS
    tolerance: float = 0.05  # relative logits error the parity and placement checks allow

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Scenario:
        raw = json.loads(text, object_hook=_device_keys)
        return cls(
            raw["name"],
            ModelSpec(**{**raw["model"], "towers": tuple(raw["model"]["towers"])}),
            QuantSpec(**raw["quant"]) if raw["quant"] else None,
            PlacementSpec(**raw["placement"]),
            AdapterSpec(**raw["adapter"]),
            PeftCallSpec(**raw["peft"]),
            raw["action"],
            MachineSpec(**raw["machine"]) if raw.get("machine") else None,
            tuple(raw.get("checks", ())),
            raw.get("tolerance", 0.05),
        )

    @property
    def uses_gpu(self) -> bool:
        """Whether the base load names a GPU (inputs then go to cuda, the execution device of offloaded blocks)."""
        placement = self.placement.device_map
        values = placement.values() if isinstance(placement, dict) else [placement]
        return any(isinstance(v, int) or str(v).startswith("cuda") for v in values)

    @property
    def inferred_map(self) -> bool:
        """Whether accelerate infers the base map ("auto"): the execution device is then the box's."""
        return isinstance(self.placement.device_map, str) and self.placement.device_map in AUTO_MAPS


def text_config(text: dict[str, Any]) -> dict[str, Any]:
    """A spec's text dimensions as `Gemma4TextConfig` keywords: the layer pattern repeated, the layer count from it."""
    cfg = {k: v for k, v in text.items() if k not in ("layer_types", "layer_repeat")}
    cfg["layer_types"] = list(text["layer_types"]) * text["layer_repeat"]
    cfg["num_hidden_layers"] = len(cfg["layer_types"])
    return cfg


def _device_keys(mapping: dict[str, Any]) -> dict[Any, Any]:
    # JSON keys are strings; max_memory names GPUs by index
    return {int(k) if k.isdigit() else k: v for k, v in mapping.items()}


SCALES = {"e2b": E2B_TEXT, "e4b": E4B_TEXT, "tiny": TINY_TEXT}


def scaled(scenario: Scenario, scale: str) -> Scenario:
    """The same scenario at E2B/E4B (real dimensions) or tiny scale."""
    return replace(
        scenario,
        model=replace(scenario.model, text=dict(SCALES[scale]), tower_scale="tiny" if scale == "tiny" else "e2b"),
    )


def scale_of(scenario: Scenario) -> str | None:
    """Which named scale the spec's text model has (None for a toy or an in-between size)."""
    if scenario.model.kind != "gemma4":
        return None
    return next((name for name, text in SCALES.items() if text == scenario.model.text), None)
