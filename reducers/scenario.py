"""Scenario specs: a small, typed, serializable description of a real Gemma 4 + bitsandbytes + PEFT setup,
rendered to a standalone script that builds a random checkpoint and adapter in a temp dir and runs one
action. Structured passes (`reducers/scenario_passes.py`) propose simpler specs; the script reducer takes
the last rendering from there.

A spec either describes Gemma 4 (`model.kind == "gemma4"`) or one of the toys that stand in for it once
the bug is known to live below the model: a stack of `Linear4bit` layers dispatched with accelerate's raw
`dispatch_model` (families A, B), a `Gemma4ClippableLinear`-shaped wrapper (D), a shared-KV toy (C).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

# Real text dimensions of the released checkpoints (NOTES; the class defaults are not these).
E2B_TEXT = dict(hidden_size=1536, intermediate_size=6144, num_hidden_layers=35, num_attention_heads=8,
                num_key_value_heads=1, head_dim=256, global_head_dim=512, sliding_window=512,
                hidden_size_per_layer_input=256, vocab_size=262144, vocab_size_per_layer_input=262144,
                final_logit_softcapping=30.0, num_kv_shared_layers=20, use_double_wide_mlp=True,
                layer_types=["sliding_attention"] * 4 + ["full_attention"], layer_repeat=7)
E4B_TEXT = dict(E2B_TEXT, hidden_size=2560, intermediate_size=10240, num_hidden_layers=42, num_key_value_heads=2,
                num_kv_shared_layers=18, layer_types=["sliding_attention"] * 5 + ["full_attention"], layer_repeat=7)
TINY_TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=64, global_head_dim=64, sliding_window=512,
                 hidden_size_per_layer_input=64, vocab_size=128, vocab_size_per_layer_input=128,
                 final_logit_softcapping=30.0, num_kv_shared_layers=2, use_double_wide_mlp=False,
                 layer_types=["sliding_attention", "full_attention"], layer_repeat=2)
VISION = {"e2b": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16, num_attention_heads=12,
                      num_key_value_heads=12, head_dim=64, use_clipped_linears=False),
          "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=2, head_dim=32, use_clipped_linears=False)}
AUDIO = {"e2b": dict(hidden_size=1024, num_hidden_layers=12, num_attention_heads=8, use_clipped_linears=True,
                     output_proj_dims=1536),
         "tiny": dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, use_clipped_linears=True,
                      output_proj_dims=64)}
SEEDS_INNER_LINEAR = (r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
                      r"|.*(vision_tower|audio_tower).*\.(q_proj|k_proj|v_proj|o_proj)\.linear")
BROAD_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ACTIONS = ("forward", "generate", "merge", "dequantize_merge", "parity")
TOYS = ("linear4bit_dispatch", "clippable_wrapper", "shared_kv")


@dataclass(frozen=True)
class ModelSpec:
    kind: str = "gemma4"               # "gemma4" or one of TOYS
    text: dict[str, Any] = field(default_factory=lambda: dict(TINY_TEXT))
    towers: tuple[str, ...] = ("vision", "audio")
    tower_scale: str = "tiny"          # "e2b" | "tiny"


@dataclass(frozen=True)
class QuantSpec:
    load_in_4bit: bool = True
    quant_type: str = "nf4"
    double_quant: bool = True
    compute_dtype: str = "bfloat16"
    fp32_cpu_offload: bool = True      # llm_int8_enable_fp32_cpu_offload: required for cpu entries on a GPU


@dataclass(frozen=True)
class PlacementSpec:
    device_map: dict[str, Any] | str = "cpu"
    max_memory: dict[str, str] | None = None
    offload_folder: bool = False


@dataclass(frozen=True)
class AdapterSpec:
    r: int = 8
    alpha: int = 16
    targets: str | list[str] = SEEDS_INNER_LINEAR


@dataclass(frozen=True)
class PeftCallSpec:
    call: str = "from_pretrained"      # "from_pretrained" | "get_peft_model" | "dispatch_model"
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

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Scenario":
        raw = json.loads(text, object_hook=_device_keys)
        return cls(raw["name"], ModelSpec(**{**raw["model"], "towers": tuple(raw["model"]["towers"])}),
                   QuantSpec(**raw["quant"]) if raw["quant"] else None, PlacementSpec(**raw["placement"]),
                   AdapterSpec(**raw["adapter"]), PeftCallSpec(**raw["peft"]), raw["action"])


def _device_keys(mapping: dict[str, Any]) -> dict[Any, Any]:
    # JSON keys are strings; max_memory names GPUs by index
    return {int(k) if k.isdigit() else k: v for k, v in mapping.items()}


def scaled(scenario: Scenario, scale: str) -> Scenario:
    """The same scenario at E2B/E4B (real dimensions) or tiny scale."""
    text = {"e2b": E2B_TEXT, "e4b": E4B_TEXT, "tiny": TINY_TEXT}[scale]
    return replace(scenario, model=replace(scenario.model, text=dict(text), tower_scale="tiny" if scale == "tiny" else "e2b"))


# --- presets: the seeds' scenarios ---------------------------------------------------------------------

GPU_SPLIT = {"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0}
# The CPU-only analogue must name two devices: from_pretrained records `hf_device_map` (which makes PEFT
# redispatch) only for a multi-device map, and on CPU the other device is disk. Towers or quantized layers
# on disk fail at load ("... is on the meta device", a separate bug); the tied, unquantized lm_head loads.
CPU_SPLIT = {"": "cpu", "lm_head": "disk"}


def presets(device: str) -> dict[str, Scenario]:
    """The seeds' scenarios; `device` "cuda" gives their GPU/CPU layouts, "cpu" the CPU-only analogues
    (cpu + disk entries, which make PEFT redispatch as the split does)."""
    gpu = device == "cuda"
    split = GPU_SPLIT if gpu else CPU_SPLIT
    peft_split = GPU_SPLIT if gpu else {"": "cpu", "base_model.model.lm_head": "disk"}
    whole = {"": 0} if gpu else "cpu"
    offload = {"offload_dir": "OFFLOAD"}
    return {
        "r05-all-gpu": Scenario("r05-all-gpu", placement=PlacementSpec(whole)),
        "r03-split": Scenario("r03-split", placement=PlacementSpec(split, offload_folder=True), peft=PeftCallSpec(kwargs=offload)),
        "r03-split-no-dq": Scenario("r03-split-no-dq", quant=QuantSpec(double_quant=False),
                                    placement=PlacementSpec(split, offload_folder=True), peft=PeftCallSpec(kwargs=offload)),
        "r06-peft-device-map": Scenario("r06-peft-device-map",
                                        placement=PlacementSpec(split, offload_folder=True),
                                        peft=PeftCallSpec(kwargs={"device_map": peft_split, **offload})),
        # memory pressure on PEFT's redispatch: infer_auto_device_map then offloads quantized text layers,
        # which is what reaches families A/B (a roomy GPU keeps every Linear4bit on it)
        **{f"r03-split-peft-{budget}": Scenario(f"r03-split-peft-{budget}", placement=PlacementSpec(split, offload_folder=True),
                                                 peft=PeftCallSpec(kwargs={**offload, "max_memory": {0 if gpu else "cpu": budget, "cpu": "100GiB"}}))
           for budget in ("1GiB", "200MiB")},
        "broad-targets": Scenario("broad-targets", placement=PlacementSpec(whole), adapter=AdapterSpec(targets=BROAD_TARGETS),
                                  action="forward"),
        "merge-parity": Scenario("merge-parity", placement=PlacementSpec(whole), action="parity"),
        # the seeds' control for F: the same merge into a bf16 base (its error is the floor the check can see)
        "merge-parity-bf16": Scenario("merge-parity-bf16", quant=None, placement=PlacementSpec(whole), action="parity"),
        "dequantize-merge": Scenario("dequantize-merge", placement=PlacementSpec(whole), action="dequantize_merge"),
    }


# --- what the seeds reported, per preset --------------------------------------------------------------

@dataclass(frozen=True)
class SeedReport:
    """What the seeds (and NOTES' version history) say a preset does. `expect` maps "set" or "set/scale" to a
    regex over the failure headline, or "pass"; `case` is the catalog case of the same family."""
    source: str
    family: str
    case: str | None
    expect: dict[str, str]

    def expected(self, set_name: str, scale: str) -> str | None:
        return self.expect.get(f"{set_name}/{scale}", self.expect.get(set_name))


_R03 = {"pinned": r"_is_hf_initialized|offset\.item", "newest": r"offset\.item|Cannot copy out of meta"}
SEED_REPORTS: dict[str, SeedReport] = {
    "r05-all-gpu": SeedReport("seed R05 (everything on GPU)", "-", None, {"pinned": "pass", "newest": "pass"}),
    **{name: SeedReport("seed R03 (split + PeftModel.from_pretrained); newest: B fixed, then A", "B, A", None, _R03)
       for name in ("r03-split", "r03-split-no-dq", "r03-split-peft-1GiB", "r03-split-peft-200MiB")},
    "r06-peft-device-map": SeedReport("seed R06 (PEFT device_map); C fixed in transformers 5.23", "C", "gemma4-shared-kv-keyerror",
                                      {"pinned": r"^KeyError: \d+$", "pinned/e2b": r"^KeyError: 13$",
                                       "pinned/e4b": r"^KeyError: 22$", "newest": "pass"}),
    "broad-targets": SeedReport("seeds: broad target list", "D", "gemma4-clippable-linear-target",
                                {s: r"Target module Gemma4ClippableLinear\(" for s in ("pinned", "newest")}),
    "merge-parity": SeedReport("seeds: merge into 4-bit", "F", "lora-4bit-merge-parity",
                               {s: "diverges from the adapter output" for s in ("pinned", "newest")}),
    "merge-parity-bf16": SeedReport("seeds: the same merge into bf16 matches", "F (control)", None,
                                    {"pinned": "pass", "newest": "pass"}),
    "dequantize-merge": SeedReport("seeds: dequantize() then merge", "G", "dequantize-merge-quant-state",
                                   {s: r"has no attribute 'quant_state'" for s in ("pinned", "newest")}),
}


# --- rendering -----------------------------------------------------------------------------------------

def render(scenario: Scenario) -> str:
    if scenario.model.kind != "gemma4":
        return TOY_RENDERERS[scenario.model.kind](scenario)
    return "\n".join(_gemma4_lines(scenario)) + "\n"


def checkpoint_key(scenario: Scenario) -> str:
    """Name of the spec's checkpoint (base + adapter) in the shared cache: the model and the adapter decide it."""
    return hashlib.sha1(json.dumps([asdict(scenario.model), asdict(scenario.adapter)], sort_keys=True).encode()).hexdigest()[:12]


BUILT = "adapter/adapter_config.json"  # written last by a build: its presence under the cache key means built


def render_build(scenario: Scenario) -> str | None:
    """The rendering cut after its checkpoint build, run before the timed run so that a build of minutes never
    counts against a candidate's timeout. None where the build is cheap enough to stay in the run: a toy, or
    tiny dimensions (a second of work; a separate process would import torch once more per candidate)."""
    m = scenario.model
    if m.kind != "gemma4" or (m.text == TINY_TEXT and m.tower_scale == "tiny"):
        return None
    return "\n".join(_gemma4_build_lines(scenario)) + "\n"


def _header(scenario: Scenario, deps: list[str], summary: str) -> list[str]:
    return ["# /// script", '# requires-python = ">=3.10"', f"# dependencies = {json.dumps(['torch', *deps])}", "# ///",
            f'"""Scenario {scenario.name} (rendered by minrepro from a scenario spec): {summary}"""']


def _text_config(text: dict[str, Any]) -> dict[str, Any]:
    cfg = {k: v for k, v in text.items() if k not in ("layer_types", "layer_repeat")}
    cfg["layer_types"] = list(text["layer_types"]) * text["layer_repeat"]
    cfg["num_hidden_layers"] = len(cfg["layer_types"])
    return cfg


def _gemma4_build_lines(s: Scenario) -> list[str]:
    """Header, imports, config and the checkpoint build: the part of a rendering `render_build` runs alone."""
    m = s.model
    quantized = s.quant is not None
    summary = (f"Gemma 4 ({m.text['num_hidden_layers']} layers, hidden {m.text['hidden_size']}, towers "
               f"{', '.join(m.towers) or 'none'}), {'4-bit' if quantized else 'bf16'}, device_map {s.placement.device_map!r}, "
               f"{s.peft.call}, then {s.action}.")
    lines = _header(s, ["transformers", "peft", "accelerate"] + (["bitsandbytes"] if quantized else []), summary)
    classes = ["Gemma4Config", "Gemma4ForConditionalGeneration", "Gemma4TextConfig"]
    classes += ["Gemma4VisionConfig"] * ("vision" in m.towers) + ["Gemma4AudioConfig"] * ("audio" in m.towers)
    classes += ["BitsAndBytesConfig"] * quantized
    peft_names = ["LoraConfig", "get_peft_model"] + (["PeftModel"] if s.peft.call == "from_pretrained" else [])
    lines += ["import fcntl", "import os", "import tempfile", "", "import torch"]
    if s.peft.call == "dispatch_model":
        lines += ["from accelerate import dispatch_model"]
    lines += [f"from peft import {', '.join(sorted(peft_names))}", f"from transformers import {', '.join(sorted(classes))}", ""]
    towers = []
    if "vision" in m.towers:
        towers.append(f"vision_config=Gemma4VisionConfig(**{VISION[m.tower_scale]!r})")
    if "audio" in m.towers:
        towers.append(f"audio_config=Gemma4AudioConfig(**{AUDIO[m.tower_scale]!r})")
    key = checkpoint_key(s)
    lines += [f"config = Gemma4Config(text_config=Gemma4TextConfig(**{_text_config(m.text)!r}), {', '.join(towers)})".replace(", )", ")"),
              f"lora = LoraConfig(r={s.adapter.r}, lora_alpha={s.adapter.alpha}, target_modules={s.adapter.targets!r}, init_lora_weights=False)",
              "cache = os.environ.get('MINREPRO_SCENARIO_CACHE')  # reuse a checkpoint built for the same model",
              f"root = os.path.join(cache, {key!r}) if cache else tempfile.mkdtemp()",
              "os.makedirs(root, exist_ok=True)",
              'with open(root + "/.build-lock", "w") as lock:  # concurrent runs build a shared checkpoint once',
              "    fcntl.flock(lock, fcntl.LOCK_EX)",
              f'    if not os.path.exists(root + "/{BUILT}"):',
              "        torch.manual_seed(0)",
              "        torch.set_default_dtype(torch.bfloat16)  # random weights, saved as the checkpoints are",
              '        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):  # an E2B init on CPU takes minutes',
              "            model = Gemma4ForConditionalGeneration(config)",
              '        model.save_pretrained(root + "/base")',
              '        get_peft_model(model, lora).save_pretrained(root + "/adapter")',
              "        del model",
              "        torch.set_default_dtype(torch.float32)"]
    return lines


def _gemma4_lines(s: Scenario) -> list[str]:
    lines = _gemma4_build_lines(s)
    quantized = s.quant is not None
    load = [f'root + "/base"', f"device_map={s.placement.device_map!r}", "dtype=torch.bfloat16"]
    if quantized:
        q = s.quant
        lines.append(f"quant = BitsAndBytesConfig(load_in_4bit={q.load_in_4bit}, bnb_4bit_quant_type={q.quant_type!r}, "
                     f"bnb_4bit_use_double_quant={q.double_quant}, bnb_4bit_compute_dtype=torch.{q.compute_dtype}, "
                     f"llm_int8_enable_fp32_cpu_offload={q.fp32_cpu_offload})")
        load.append("quantization_config=quant")
    if s.placement.max_memory:
        load.append(f"max_memory={s.placement.max_memory!r}")
    if s.placement.offload_folder:
        load.append('offload_folder=tempfile.mkdtemp()')
    lines.append(f"base = Gemma4ForConditionalGeneration.from_pretrained({', '.join(load)})")
    lines += _peft_lines(s)
    lines.append("ids = torch.tensor([[2, 3, 4, 5]], device=base.get_input_embeddings().weight.device)")
    lines += ACTION_LINES[s.action]
    return lines


def _peft_lines(s: Scenario) -> list[str]:
    kwargs = ", ".join(f"{k}={_kwarg(v)}" for k, v in sorted(s.peft.kwargs.items()))
    if s.peft.call == "from_pretrained":
        return [f'model = PeftModel.from_pretrained(base, root + "/adapter"{", " + kwargs if kwargs else ""})']
    if s.peft.call == "get_peft_model":
        return ["model = get_peft_model(base, lora)"]
    # what PeftModel.from_pretrained does on a model whose hf_device_map names cpu/disk, without PEFT's wrapper
    return ["model = get_peft_model(base, lora)",
            f"dispatch_model(model, device_map={s.peft.kwargs.get('device_map', s.placement.device_map)!r}, "
            "offload_dir=tempfile.mkdtemp())"]


def _kwarg(value: Any) -> str:
    return "tempfile.mkdtemp()" if value == "OFFLOAD" else repr(value)


ACTION_LINES = {
    "forward": ["print(model(input_ids=ids).logits.shape)"],
    "generate": ["print(model.generate(input_ids=ids, max_new_tokens=3, do_sample=False))"],
    "merge": ["model = model.merge_and_unload()", "print(model(input_ids=ids).logits.shape)"],
    "dequantize_merge": ["model.dequantize()", "model = model.merge_and_unload()", "print(model(input_ids=ids).logits.shape)"],
    "parity": ["import inspect",
               "from peft import LoraModel",
               "# a merge option that keeps adapter parity, where this peft offers one (the patched one does)",
               "option = {'dequantize': True} if 'dequantize' in inspect.signature(LoraModel.merge_and_unload).parameters else {}",
               "with torch.no_grad():",
               "    adapter_out = model(input_ids=ids).logits.float()",
               "    merged_out = model.merge_and_unload(**option)(input_ids=ids).logits.float()",
               "error = ((merged_out - adapter_out).norm() / adapter_out.norm()).item()",
               'assert error < 0.05, f"merge into 4-bit diverges from the adapter output: relative error {error:.3f}"',
               'print("merged output matches the adapter")'],
}


# --- toys that replace Gemma 4 -------------------------------------------------------------------------

def _toy_linear4bit_dispatch(s: Scenario) -> str:
    """Families A/B below PEFT: a LoRA-shaped container around an offloaded 4-bit layer, raw dispatch_model."""
    dq = s.quant is not None and s.quant.double_quant
    lines = _header(s, ["bitsandbytes", "accelerate"], "toy: Linear4bit in a parameter-less container, dispatched "
                    "with a cpu/disk device_map as PEFT's redispatch does.")
    lines += ["import tempfile", "", "import bitsandbytes as bnb", "import torch", "from accelerate import dispatch_model", "",
              f"inner = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compress_statistics={dq}))",
              'model = torch.nn.Sequential(torch.nn.Sequential(inner), torch.nn.Linear(64, 64)).to("cpu")  # quantizes',
              "model[0][0][0].weight._is_hf_initialized = True  # what from_pretrained leaves on loaded parameters",
              'dispatch_model(model, device_map={"0": "disk", "1": "cpu"}, offload_dir=tempfile.mkdtemp())',
              "print(model(torch.randn(2, 64)).shape)"]
    return "\n".join(lines) + "\n"


def _toy_clippable_wrapper(s: Scenario) -> str:
    """Family D: the wrapper shape (real layer at .linear, clamp buffers), under Gemma 4's class name so the
    error message stays the same."""
    lines = _header(s, ["peft"], "toy: a module shaped like Gemma4ClippableLinear targeted by LoRA.")
    lines += ["import torch", "from peft import LoraConfig, get_peft_model", "", "",
              "class Gemma4ClippableLinear(torch.nn.Module):",
              "    def __init__(self, n):", "        super().__init__()",
              "        self.linear = torch.nn.Linear(n, n, bias=False)",
              '        self.register_buffer("input_max", torch.tensor(float("inf")))', "",
              "    def forward(self, x):", "        return self.linear(x.clamp(max=self.input_max))", "", "",
              "model = torch.nn.Sequential()", 'model.add_module("q_proj", Gemma4ClippableLinear(16))',
              f"model = get_peft_model(model, LoraConfig(target_modules={s.adapter.targets!r}))",
              "print(model(torch.randn(2, 16)).shape)"]
    return "\n".join(lines) + "\n"


def _toy_shared_kv(s: Scenario) -> str:
    """Family C below transformers: layers share a dict through kwargs; hooks copy it."""
    lines = _header(s, ["accelerate"], "toy: two layers sharing a dict kwarg, dispatched without skip_keys.")
    lines += ["import tempfile", "", "import torch", "from accelerate import dispatch_model", "", "",
              "class Layer(torch.nn.Module):", "    def __init__(self, source):", "        super().__init__()",
              "        self.source, self.proj = source, torch.nn.Linear(8, 8)", "",
              "    def forward(self, x, shared_kv_states):", "        if self.source:",
              "            shared_kv_states[0] = self.proj(x)", "        return x + shared_kv_states[0]", "", "",
              "class Model(torch.nn.Module):", "    def __init__(self):", "        super().__init__()",
              "        self.layers = torch.nn.ModuleList([Layer(True), Layer(False)])", "",
              "    def forward(self, x):", "        shared_kv_states = {}", "        for layer in self.layers:",
              "            x = layer(x, shared_kv_states=shared_kv_states)", "        return x", "", "",
              'model = dispatch_model(Model(), device_map={"layers.0": "cpu", "layers.1": "disk"}, offload_dir=tempfile.mkdtemp())',
              "print(model(torch.randn(2, 8)).shape)"]
    return "\n".join(lines) + "\n"


TOY_RENDERERS = {"linear4bit_dispatch": _toy_linear4bit_dispatch, "clippable_wrapper": _toy_clippable_wrapper,
                 "shared_kv": _toy_shared_kv}
