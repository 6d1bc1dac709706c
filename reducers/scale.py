"""Scale-down proposals: a script that loads a real checkpoint is rewritten to build a tiny twin of the model it
loaded (same class, same structural config fields, dimensions shrunk) and to load that instead, with the device
maps the original run inferred written as literals so that the placement survives the shrink.

Pure source transformations over what a traced run recorded (`minrepro.harness._bootstrap`'s `from_pretrained`,
`PeftModel.from_pretrained` and `dispatch_model` records, passed in as plain dicts). Nothing here runs code: the
driver judges each proposal with the same differential oracle as every other candidate."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .ddmin import ddmin

# Dimension fields and their tiny values. Layer counts, layer types, KV sharing, towers and tied embeddings are
# structure: they stay, so a recorded device map (which names layers) still fits the twin. The vocabulary stays
# too: the script's own token ids must still index it (a shrunk one crashes where the bug is fixed, on CUDA with a
# device-side assert). So does Gemma 4's per-layer vocabulary (shrunk to 128, the E4B twin's prompt ids raised
# IndexError in the per-layer embedding on CPU where the bug is fixed); its width shrinks further instead.
SHRINK: dict[str, int] = {
    "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 64, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 32, "global_head_dim": 32, "hidden_size_per_layer_input": 4,
    "output_proj_dims": 64, "projection_dim": 64,
}
# Provenance, not structure: written by save/load, meaningless (or harmful) in a freshly built twin.
CONFIG_NOISE = {"_name_or_path", "transformers_version", "architectures", "quantization_config", "dtype",
                "torch_dtype", "_attn_implementation_autoset", "output_attentions", "output_hidden_states"}
PEFT_NOISE = {"base_model_name_or_path", "revision", "inference_mode", "peft_version", "auto_mapping", "peft_type"}
UNSET_MARK = "__minrepro_unset__"  # a nested config's defaults where its class leaves it unset (see _bootstrap)
LOADERS = {"from_pretrained"}
DISPATCHERS = {"dispatch_model"}
Path_ = tuple[str, ...]  # a field's place in a nested config: ("text_config", "hidden_size")


@dataclass(frozen=True)
class Load:
    """One `from_pretrained` of a model in the original run."""
    line: int
    model_class: str
    model_type: str
    config: dict[str, Any]
    defaults: dict[str, Any]
    device_map: dict[str, Any] = field(default_factory=dict)  # what transformers inferred ({} when not split)
    parameters: dict[str, int] = field(default_factory=dict)  # "Params4bit@cpu": count


@dataclass(frozen=True)
class Adapter:
    """One `PeftModel.from_pretrained` in the original run."""
    line: int
    config_class: str
    config: dict[str, Any]
    defaults: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """What the traced original showed: the model loads, the adapter loads, and the maps each dispatch used (by the
    script line it came from)."""
    loads: tuple[Load, ...]
    adapters: tuple[Adapter, ...] = ()
    dispatches: tuple[tuple[int, dict[str, Any]], ...] = ()

    @property
    def fields(self) -> list[Path_]:
        """The dimension fields a twin may shrink (those larger than their tiny value), over every load."""
        return [(str(i), *p) for i, load in enumerate(self.loads) for p in shrinkable(load.config)]


def plan_from_trace(records: Sequence[dict]) -> Plan | None:
    """The plan from a traced run's records, or None when the run loaded no model from a checkpoint."""
    loads = tuple(Load(r["line"], r["model_class"], r["model_type"], r["config"], r["config_defaults"],
                       r.get("device_map") or {}, r.get("parameters") or {})
                  for r in records if r.get("event") == "from_pretrained" and r.get("line") and "config" in r)
    adapters = tuple(Adapter(r["line"], r["config_class"], r["peft_config"], r["peft_defaults"])
                     for r in records if r.get("event") == "peft_from_pretrained" and r.get("line")
                     and "peft_config" in r)
    dispatches = tuple((r["line"], r["device_map"]) for r in records
                       if r.get("event") == "dispatch_model" and r.get("status") == "started" and r.get("line")
                       and r.get("device_map") and not str(r.get("caller", "")).startswith("transformers."))
    return Plan(loads, adapters, dispatches) if loads else None


def shrinkable(config: dict[str, Any], prefix: Path_ = ()) -> list[Path_]:
    out: list[Path_] = []
    for key, value in config.items():
        if isinstance(value, dict):
            out += shrinkable(value, (*prefix, key))
        elif type(value) is int and key in SHRINK and value > SHRINK[key]:
            out.append((*prefix, key))
    return out


def structural(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The fields that differ from the config class's defaults (nested configs likewise), provenance dropped. Any
    other dict (Gemma 4's `per_layer_config`, rope parameters) is one value, kept whole where it differs: a diff of
    it would name some layers and leave the class's defaults (sized for another layer count) for the others."""
    out = {}
    for key, value in config.items():
        if key in CONFIG_NOISE:
            continue
        default = defaults.get(key) if isinstance(defaults, dict) else None
        if isinstance(value, dict) and isinstance(default, dict) and "model_type" in value:
            inner = structural(value, default)
            if inner or default.get(UNSET_MARK):  # a tower the class leaves unset: `{}` still builds it
                out[key] = inner
        elif value != default:
            out[key] = value
    return out


def twin_config(load: Load, shrunk: set[Path_]) -> dict[str, Any]:
    """The twin's config: the structural fields, with each shrunk field at its tiny value."""
    out = copy.deepcopy(structural(load.config, load.defaults))  # the record's dicts are not the twin's to edit
    for path in sorted(shrunk):
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = SHRINK[path[-1]]
    return out


def adapter_config(adapter: Adapter) -> dict[str, Any]:
    """The adapter's non-default fields; a twin adapter starts non-zero (a zero B hides what the adapter does)."""
    out = {k: v for k, v in adapter.config.items() if k not in PEFT_NOISE and v != adapter.defaults.get(k)}
    return {**out, "init_lora_weights": False}


def literal_device(value: Any) -> Any:
    text = str(value)
    return int(text) if text.isdigit() else text


def loaded_map(load: Load) -> dict[str, Any] | None:
    """The map the load ended with, as a literal: transformers' inferred map, or the one device every weight is on."""
    if load.device_map:
        return {k: literal_device(v) for k, v in load.device_map.items()}
    devices = {key.split("@", 1)[1] for key in load.parameters if "@" in key}
    return {"": literal_device(devices.pop().replace("cuda:", "") if devices else "")} if len(devices) == 1 else None


# --- source rewriting -------------------------------------------------------------------------------------------

def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def calls_at(tree: ast.AST, line: int, names: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) in names
            and n.lineno <= line <= (n.end_lineno or n.lineno)]


def set_keyword(call: ast.Call, name: str, value: ast.expr | None) -> None:
    call.keywords = [k for k in call.keywords if k.arg != name] + ([ast.keyword(name, value)] if value else [])


def set_argument(call: ast.Call, index: int, keyword: str, value: ast.expr) -> None:
    if len(call.args) > index:
        call.args[index] = value
    else:
        set_keyword(call, keyword, value)


def place(call: ast.Call, device_map: dict[str, Any]) -> None:
    """The call uses the recorded map as a literal; the budget that inferred it goes."""
    literal = ast.parse(repr(device_map), mode="eval").body
    if _name(call.func) in DISPATCHERS:
        set_argument(call, 1, "device_map", literal)
    else:
        set_keyword(call, "device_map", literal)
    set_keyword(call, "max_memory", None)


def prelude(plan: Plan, shrunk: set[Path_]) -> list[ast.stmt]:
    """Statements that build and save the twins (and twin adapters) in a temp dir."""
    lines = ["import tempfile", "import transformers"] + (["import peft"] if plan.adapters else [])
    lines += ["transformers.set_seed(0)", "twin_dir = tempfile.mkdtemp()"]
    for i, load in enumerate(plan.loads):
        fields = {p[1:] for p in shrunk if p[0] == str(i)}
        lines += [f"twin = transformers.{load.model_class}(transformers.AutoConfig.for_model("
                  f"{load.model_type!r}, **{twin_config(load, fields)!r}))",
                  f"twin.save_pretrained(twin_dir + '/model{i}')"]
        for j, adapter in enumerate(plan.adapters if i == 0 else ()):
            lines.append(f"peft.get_peft_model(twin, peft.{adapter.config_class}(**{adapter_config(adapter)!r}))"
                         f".save_pretrained(twin_dir + '/adapter{j}')")
    return ast.parse("\n".join(lines)).body


def _insert_at(body: list[ast.stmt]) -> int:
    """After the module docstring, `__future__` imports and the leading imports."""
    index = 0
    while index < len(body) and (isinstance(body[index], (ast.Import, ast.ImportFrom))
                                 or (isinstance(body[index], ast.Expr) and isinstance(body[index].value, ast.Constant))):
        index += 1
    return index


def twin_source(source: str, plan: Plan, shrunk: set[Path_], literal_maps: bool = True) -> str | None:
    """The script loading tiny twins instead of its checkpoints, or None where a recorded call is not found."""
    tree = ast.parse(source)
    for i, load in enumerate(plan.loads):
        calls = calls_at(tree, load.line, LOADERS)
        if not calls:
            return None
        set_argument(calls[0], 0, "pretrained_model_name_or_path", ast.parse(f"twin_dir + '/model{i}'", mode="eval").body)
        if literal_maps and (device_map := loaded_map(load)):
            place(calls[0], device_map)
    for j, adapter in enumerate(plan.adapters):
        calls = calls_at(tree, adapter.line, LOADERS)
        if not calls:
            return None
        set_argument(calls[0], 1, "model_id", ast.parse(f"twin_dir + '/adapter{j}'", mode="eval").body)
    for line, device_map in plan.dispatches if literal_maps else ():
        calls = calls_at(tree, line, LOADERS | DISPATCHERS)
        if calls:
            place(calls[0], {k: literal_device(v) for k, v in device_map.items()})
    tree.body[_insert_at(tree.body):0] = prelude(plan, shrunk)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


FirstInteresting = Callable[[Sequence[str]], "int | None"]


def scale_down(source: str, plan: Plan, first_interesting: FirstInteresting) -> tuple[str, list[Path_]] | None:
    """The smallest twin that is still interesting, and the fields it had to keep at their real size; None when
    no twin is. Every field shrunk first (one run); else delta debugging over the fields kept at real size, and
    the result checked once more (ddmin assumes the whole set is interesting: it need not be, the maps are
    literal there and were inferred in the original)."""
    fields = plan.fields

    def twin(kept: Sequence[Path_]) -> str | None:
        return twin_source(source, plan, set(fields) - set(kept))

    first = twin([])
    if first is None:
        return None
    if first_interesting([first]) == 0:
        return first, []

    def first_kept(candidates: Sequence[list[Path_]]) -> int | None:
        sources = [twin(kept) for kept in candidates]
        found = first_interesting([s for s in sources if s is not None])
        return None if found is None else [i for i, s in enumerate(sources) if s is not None][found]

    kept = ddmin(list(fields), first_kept)
    final = twin(kept)
    return (final, kept) if final is not None and first_interesting([final]) == 0 else None
