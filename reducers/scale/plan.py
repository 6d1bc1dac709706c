"""What a traced run of the original showed (its model loads, adapter loads, dispatches, tokenizer calls and
the ids that indexed a vocabulary) as a `Plan`, and the twin's config built from a load: structural fields kept,
dimensions shrunk, towers cut or left out."""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .ids import (
    FALLBACK_IDS,
    SMALLEST_VOCABULARY,
    Path_,
    VOCAB_FIELD,
    callee_name,
    id_literals,
    ints,
    remapped,
    result_ids,
    small_ids,
    spans,
    token_ids,
    unrecorded_tokenizer_calls,
    vocabularies,
    vocabulary_floor,
    vocabulary_size,
)


# Dimension fields and their tiny values. Layer counts, layer types, KV sharing, towers and tied embeddings are
# structure: they stay, so a recorded device map (which names layers) still fits the twin. The vocabularies are not
# here: they shrink together, with the token ids that index them (`VOCABULARY`).
SHRINK: dict[str, int] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "global_head_dim": 32,
    "hidden_size_per_layer_input": 4,
    "output_proj_dims": 64,
    "projection_dim": 64,
}
TOWER_LAYERS = 1  # a nested config's layer count (a vision or audio tower) in a twin
# Provenance, not structure: written by save/load, meaningless (or harmful) in a freshly built twin.
CONFIG_NOISE = {
    "_name_or_path",
    "transformers_version",
    "architectures",
    "quantization_config",
    "dtype",
    "torch_dtype",
    "_attn_implementation_autoset",
    "output_attentions",
    "output_hidden_states",
}
PEFT_NOISE = {"base_model_name_or_path", "revision", "inference_mode", "peft_version", "auto_mapping", "peft_type"}
UNSET_MARK = "__minrepro_unset__"  # a nested config's defaults where its class leaves it unset (see _bootstrap)
LOADERS = {"from_pretrained"}
DISPATCHERS = {"dispatch_model"}


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
    generation_ids: dict[str, Any] = field(default_factory=dict)  # its generation config's special ids


@dataclass(frozen=True)
class Adapter:
    """One `PeftModel.from_pretrained` in the original run."""

    line: int
    config_class: str
    config: dict[str, Any]
    defaults: dict[str, Any]


@dataclass(frozen=True)
class Tokenized:
    """A tokenizer call of the script (by line) and what it returned: the same every time, as plain data (see
    `_bootstrap._data`), or None (calls at that line returned different things, or something no literal holds)."""

    line: int
    method: str
    result: dict[str, Any] | None
    ids: bool = True  # some call there gave ids (not text): left live in a twin, they index its vocabulary


@dataclass(frozen=True)
class Plan:
    """What the traced original showed: the model loads, the adapter loads, and the maps each dispatch used (by the
    script line it came from); the ids that indexed a vocabulary (`ids`, None where there were too many to record),
    the script's tokenizer calls and its tokenizers' special ids (by the line that loaded each)."""

    loads: tuple[Load, ...]
    adapters: tuple[Adapter, ...] = ()
    dispatches: tuple[tuple[int, dict[str, Any]], ...] = ()
    ids: frozenset[int] | None = frozenset()
    tokenized: tuple[Tokenized, ...] = ()
    tokenizers: tuple[tuple[int, dict[str, int]], ...] = ()
    least: int = 0  # the vocabulary the script's own numbers ask for (`vocabulary_floor`)
    unrecorded: tuple[int, ...] = ()  # lines of tokenizer calls the run did not record (`unrecorded_tokenizer_calls`)

    @property
    def fields(self) -> list[Path_]:
        """What a twin may shrink, over every load: the dimension fields larger than their tiny value, the towers
        (gone, or else down to one layer), and the vocabularies with the ids (`VOCAB_FIELD`, one field)."""
        out = [(str(i), *p) for i, load in enumerate(self.loads) for p in shrinkable(load.config, load.defaults)]
        return out + ([VOCAB_FIELD] if self.vocabulary is not None or self.replaceable else [])

    @property
    def vocabulary(self) -> int | None:
        """The twin's vocabulary size, where one shrinks (None: the ids were too many to record, or every
        vocabulary is that small already)."""
        if self.ids is None:
            return None
        size = max(vocabulary_size(self.ids), self.least)
        return size if any(v > size for load in self.loads for v in vocabularies(load.config).values()) else None

    @property
    def replaceable(self) -> list[Tokenized]:
        return [t for t in self.tokenized if t.result is not None]

    @property
    def live_lines(self) -> list[int]:
        """The lines of every tokenizer call a twin runs: ids no literal holds, or calls the run did not record."""
        differing = (t.line for t in self.tokenized if t.result is None and t.ids)
        return sorted({*differing, *self.unrecorded})

    def mapping(self) -> dict[int, int]:
        """Each id the run used, mapped into the twin's vocabulary (the identity where none shrinks)."""
        size = self.vocabulary
        return small_ids(self.ids, size) if size is not None and self.ids is not None else {}


def plan_from_trace(records: Sequence[dict], source: str = "") -> Plan | None:
    """The plan from a traced run's records (and the script, whose literal token ids count too: a run that fails
    before its forward never looked them up), or None when the run loaded no model from a checkpoint."""
    loads = tuple(
        Load(
            r["line"],
            r["model_class"],
            r["model_type"],
            r["config"],
            r["config_defaults"],
            r.get("device_map") or {},
            r.get("parameters") or {},
            r.get("generation_ids") or {},
        )
        for r in _finished_loads(records)
    )
    adapters = tuple(
        Adapter(r["line"], r["config_class"], r["peft_config"], r["peft_defaults"])
        for r in records
        if r.get("event") == "peft_from_pretrained" and r.get("line") and "peft_config" in r
    )
    dispatches = tuple(
        (r["line"], r["device_map"])
        for r in records
        if r.get("event") == "dispatch_model"
        and r.get("status") == "started"
        and r.get("line")
        and r.get("device_map")
        and not str(r.get("caller", "")).startswith("transformers.")
    )
    if not loads:
        return None
    tokenized = _tokenized(records)
    tokenizers = tuple(
        (r["line"], r.get("special_ids") or {}) for r in records if r.get("event") == "tokenizer" and r.get("line")
    )
    return Plan(
        loads,
        adapters,
        dispatches,
        _indexed_ids(records, loads, tokenized, tokenizers, source),
        tokenized,
        tokenizers,
        vocabulary_floor(source),
        tuple(
            unrecorded_tokenizer_calls(source, {t.line for t in tokenized if t.result is not None}) if source else ()
        ),
    )


def unreached_adapter_loads(source: str, records: Sequence[dict]) -> list[int]:
    """The lines of the script's `PeftModel.from_pretrained(base, ...)` calls the traced run recorded no load at (it
    never reached them: an adapter loaded after the failure) whose `base` is bound, in the call's own function, to a
    model load the run recorded: a twin shrinks that model, and the real adapter does not fit it. Only a run where
    the bug is fixed shows what the adapter is. A base the run never loaded either stays at its real size."""
    adapters = {r.get("line") for r in records if r.get("event") == "peft_from_pretrained"}
    models = {r.get("line") for r in records if r.get("event") == "from_pretrained"}
    tree = ast.parse(source)
    found = []
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]:
        nodes = list(_own_nodes(scope))
        loaded = [n for n in nodes if isinstance(n, ast.Assign) and spans(n.value, models)]
        shrunk = {target.id for n in loaded for target in n.targets if isinstance(target, ast.Name)}
        found += [
            n.lineno
            for n in nodes
            if isinstance(n, ast.Call)
            and callee_name(n.func) in LOADERS
            and isinstance(n.func, ast.Attribute)
            and ast.unparse(n.func.value).rsplit(".", 1)[-1] == "PeftModel"
            and n.args
            and getattr(n.args[0], "id", None) in shrunk
            and not spans(n, adapters)
        ]
    return sorted(found)


def _own_nodes(scope: ast.AST):
    """The nodes of a module or function, not those of the functions and classes defined in it."""
    for child in ast.iter_child_nodes(scope):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield child
        yield from _own_nodes(child)


def _finished_loads(records: Sequence[dict]) -> list[dict]:
    """One record per model load: what it returned, or, for a load that never returned (it failed, or had no weights
    to read), what it was asked for when it started."""
    chosen, pending = [], []
    for index, r in enumerate(records):
        if r.get("event") != "from_pretrained" or not r.get("line") or "config" not in r:
            continue
        if r.get("status") == "started":
            pending.append((index, r))
            continue
        starts = [p for p in pending if p[1]["line"] == r["line"]]
        if starts:
            pending.remove(starts[-1])
        chosen.append((index, r))
    return [r for _, r in sorted(chosen + pending, key=lambda pair: pair[0])]


def _tokenized(records: Sequence[dict]) -> tuple[Tokenized, ...]:
    by_line: dict[int, list[dict]] = {}
    for r in records:
        if r.get("event") == "tokenized" and r.get("line"):
            by_line.setdefault(r["line"], []).append(r)
    out = []
    for line, calls in by_line.items():
        results = [c.get("result") for c in calls]
        same = all(r == results[0] for r in results) and len({c["method"] for c in calls}) == 1
        ids = any(not r or r.get("type") != "str" for r in results)
        out.append(Tokenized(line, calls[0]["method"], results[0] if same else None, ids))
    return tuple(out)


def _indexed_ids(
    records: Sequence[dict],
    loads: Sequence[Load],
    tokenized: Sequence[Tokenized],
    tokenizers: Sequence[tuple[int, dict]],
    source: str,
) -> frozenset[int] | None:
    """Every id that indexes a vocabulary: looked up in a table of a vocabulary's size, given to generate or fallen
    back on there (pad, bos, eos), produced by a tokenizer, a special id of a tokenizer, a literal id in the script.
    A config's other ids (Gemma 4's image and audio ids) are mapped where they are among these, and left as they
    are where the run never looked them up. None where the run looked up more than the trace keeps (a data set)."""
    sizes = {size for load in loads for size in vocabularies(load.config).values()}
    ids: set[int] = set()
    for r in records:
        if r.get("event") == "token_ids" and (r.get("table") is None or r.get("table") in sizes):
            if r.get("overflow"):
                return None
            ids.update(r.get("ids") or ())
    for load in loads:  # what generate falls back on; an image token id only where the run looked it up
        fallback = [v for path, v in token_ids(load.config).items() if path[-1] in FALLBACK_IDS]
        ids.update(i for value in [*fallback, *load.generation_ids.values()] for i in ints(value))
    ids.update(i for _, special in tokenizers for i in special.values())
    ids.update(i for t in tokenized if t.result for i in result_ids(t.result))
    if source:
        ids.update(i for node in id_literals(ast.parse(source)) for i in ints(ast.literal_eval(node)))
    return frozenset(i for i in ids if type(i) is int and i >= 0)


TOWER_GONE = "(tower)"  # a field's last key: the tower a nested config builds, left out of the twin


def shrinkable(config: dict[str, Any], defaults: dict[str, Any] | None = None, prefix: Path_ = ()) -> list[Path_]:
    """The dimension fields larger than their tiny value; for each tower (a nested config other than the text one),
    the tower itself where its class leaves it unset (a twin can do without it: Gemma 4's vision and audio), and its
    layer count where no per-layer field depends on it."""
    out: list[Path_] = []
    for key, value in config.items():
        default = defaults.get(key) if isinstance(defaults, dict) else None
        if isinstance(value, dict):
            tower = "model_type" in value and key != "text_config"
            if tower and isinstance(default, dict) and default.get(UNSET_MARK):
                out.append((*prefix, key, TOWER_GONE))
            out += shrinkable(value, default, (*prefix, key))
            layers = value.get("num_hidden_layers")
            if tower and type(layers) is int and layers > TOWER_LAYERS and not _per_layer(value, layers):
                out.append((*prefix, key, "num_hidden_layers"))
        elif type(value) is int and key in SHRINK and value > SHRINK[key]:
            out.append((*prefix, key))
    return out


def _per_layer(config: dict[str, Any], layers: int) -> bool:
    return any(isinstance(v, list) and len(v) == layers for v in config.values())


def tiny_value(path: Path_) -> int:
    return TOWER_LAYERS if path[-1] == "num_hidden_layers" else SHRINK[path[-1]]


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


def twin_config(
    load: Load,
    shrunk: set[Path_],
    vocabulary: int | None = None,
    mapping: dict[int, int] | None = None,
    spelled: bool = False,
) -> dict[str, Any]:
    """The twin's config: the structural fields, with each shrunk field at its tiny value and each tower that goes
    left out; with a `vocabulary`, every vocabulary at that size and every token id mapped into it (`mapping`).
    `spelled`: every vocabulary written at its real size, a class default too, and the pad/bos/eos ids past the
    smallest vocabulary (a padding index a shrunk table must hold: Phi-3's 32000), so that the search can shrink them
    once the slice has cut what read the ids past them (`shrink_twin_vocabularies`)."""
    out = copy.deepcopy(structural(load.config, load.defaults))  # the record's dicts are not the twin's to edit
    gone = {p[:-1] for p in shrunk if p[-1] == TOWER_GONE}
    for path in sorted(p for p in shrunk if p[-1] != TOWER_GONE and not any(p[: len(g)] == g for g in gone)):
        _at(out, path[:-1])[path[-1]] = tiny_value(path)
    for path in gone:
        _at(out, path[:-1]).pop(path[-1], None)
    if spelled:
        for path, size in vocabularies(load.config).items():
            _at(out, path[:-1])[path[-1]] = size
        for path, value in token_ids(load.config).items():
            if path[-1] in FALLBACK_IDS and any(i >= SMALLEST_VOCABULARY for i in ints(value)):
                _at(out, path[:-1])[path[-1]] = value
    if vocabulary is not None:
        for path, size in vocabularies(load.config).items():
            if size > vocabulary:
                _at(out, path[:-1])[path[-1]] = vocabulary
        for path, value in token_ids(load.config).items():
            small = remapped(value, mapping or {})
            if small != value:
                _at(out, path[:-1])[path[-1]] = small
    return out


def _at(config: dict[str, Any], path: Path_) -> dict[str, Any]:
    for key in path:
        config = config.setdefault(key, {})
    return config


def adapter_config(adapter: Adapter) -> dict[str, Any]:
    """The adapter's non-default fields; a twin adapter starts non-zero (a zero B hides what the adapter does)."""
    out = {k: v for k, v in adapter.config.items() if k not in PEFT_NOISE and v != adapter.defaults.get(k)}
    return {**out, "init_lora_weights": False}
