"""Scale-down proposals: a script that loads a real checkpoint is rewritten to build a tiny twin of the model it
loaded (same class, same structural config fields, dimensions shrunk) and to load that instead, with the device
maps the original run inferred written as literals so that the placement survives the shrink.

Pure source transformations over what a traced run recorded (`minrepro.harness._bootstrap`'s `from_pretrained`,
`PeftModel.from_pretrained` and `dispatch_model` records, passed in as plain dicts). Nothing here runs code: the
driver judges each proposal with the same differential oracle as every other candidate."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .ddmin import ddmin
from .source import header_end, replace_node

Path_ = tuple[str, ...]  # a field's place in a nested config: ("text_config", "hidden_size")

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
# Every embedding table a token id indexes: they shrink together, to one small size (a twin with its per-layer
# vocabulary shrunk alone crashed where the bug is fixed: generate's ids were past it). Only in the text config:
# a tower's own vocabulary (Gemma 3n's, with its offset into the text one) is another thing.
VOCABULARY = ("vocab_size", "vocab_size_per_layer_input")
TOKEN_ID = re.compile(r"^\w*_token_(?:id|ids|index)$")  # pad/bos/eos ids, image_token_index, ...
FALLBACK_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")  # what generate falls on
# A twin's weights are random: generate picks its eos about once in a vocabulary's size of steps. At 16 a tiny Gemma 4
# twin's generate stopped after 2 of its 6 new tokens; a failure further on would be lost. At 256, one run in 32
# stops within 8 steps, and the tables stay small (256 rows of 64).
SMALLEST_VOCABULARY = 256
VOCAB_FIELD: Path_ = ("*", "vocabulary")  # the shrink of every vocabulary and the remap of every id, as one field
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
    )


_VOCAB_NAME = re.compile(r"vocab", re.IGNORECASE)


def vocabulary_floor(source: str) -> int:
    """The largest int the script binds to a name that says it is a vocabulary's size (`def batch(n, vocab=4096)`,
    `VOCAB = 4096`, `vocab_size=4096`): ids it computes from it (`random.randrange(3, vocab)`) were never recorded
    where the run failed before its forward, and a twin's vocabulary below it made a QLoRA step raise IndexError
    where the bug is fixed. 0 where there is none."""
    if not source:
        return 0
    sizes = [
        v.value
        for name, v in _bound_by_name(ast.parse(source))
        if _VOCAB_NAME.search(name) and isinstance(v, ast.Constant) and type(v.value) is int
    ]
    return max(sizes, default=0)


def _bound_by_name(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """(name, value) for what the script binds to a name it chose: a parameter's default, a keyword argument, an
    assignment to a name or an attribute, a dict's string key."""
    bound: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            defaulted = positional[len(positional) - len(node.defaults) :]
            bound += [(a.arg, d) for a, d in zip(defaulted, node.defaults, strict=True)]
            bound += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
        elif isinstance(node, ast.keyword) and node.arg:
            bound.append((node.arg, node.value))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound += [
                (t.id if isinstance(t, ast.Name) else t.attr, node.value)
                for t in targets
                if isinstance(t, (ast.Name, ast.Attribute))
            ]
        elif isinstance(node, ast.Dict):
            bound += [
                (k.value, v)
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
    return bound


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
        out.append(Tokenized(line, calls[0]["method"], results[0] if same else None))
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
        ids.update(i for value in [*fallback, *load.generation_ids.values()] for i in _ints(value))
    ids.update(i for _, special in tokenizers for i in special.values())
    ids.update(i for t in tokenized if t.result for i in _result_ids(t.result))
    if source:
        ids.update(i for node in id_literals(ast.parse(source)) for i in _ints(ast.literal_eval(node)))
    return frozenset(i for i in ids if type(i) is int and i >= 0)


def _ints(value: Any) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [i for item in value for i in _ints(item)]
    return [value] if type(value) is int else []


# --- the vocabulary: its size, the ids mapped into it, the fields and literals that hold them ---------------------


def vocabularies(config: dict[str, Any]) -> dict[Path_, int]:
    """The vocabulary sizes of a config (at its top, and in its `text_config`), by path."""
    out = {}
    for prefix, node in (((), config), (("text_config",), config.get("text_config"))):
        if isinstance(node, dict):
            out.update({(*prefix, key): node[key] for key in VOCABULARY if type(node.get(key)) is int})
    return out


def token_ids(config: dict[str, Any]) -> dict[Path_, Any]:
    """The token-id fields of a config (its top and its `text_config`): pad/bos/eos ids, image_token_index, ..."""
    out = {}
    for prefix, node in (((), config), (("text_config",), config.get("text_config"))):
        if isinstance(node, dict):
            out.update({(*prefix, k): v for k, v in node.items() if TOKEN_ID.match(k) and _ints(v)})
    return out


def vocabulary_size(ids: frozenset[int]) -> int:
    """The twin's vocabulary: a power of two that holds every id the run used, at least SMALLEST_VOCABULARY."""
    return max(SMALLEST_VOCABULARY, 1 << max(0, len(ids) - 1).bit_length())


def small_ids(ids: frozenset[int], size: int) -> dict[int, int]:
    """Each id's place in a vocabulary of `size`: an id that fits keeps its value (pad 0, eos 1, bos 2 stay), the
    others take the free places in order. The same id maps to the same small id everywhere."""
    free = iter(sorted(set(range(size)) - ids))
    return {i: (i if i < size else next(free)) for i in sorted(ids)}


def _remapped(value: Any, mapping: dict[int, int]) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_remapped(v, mapping) for v in value)
    return mapping.get(value, value) if type(value) is int else value


_ID_CONSUMERS = {"tensor", "LongTensor", "as_tensor", "IntTensor"}  # `torch.tensor([[2, 106, 1645]])`
_ID_KEYWORDS = {"input_ids", "labels", "decoder_input_ids", "inputs"}


def id_literals(tree: ast.AST) -> list[ast.List | ast.Tuple]:
    """The list and tuple literals of the script that hold token ids: the data of a tensor constructor, what an
    `input_ids=`/`labels=` keyword gets, and what a name that flows into either is bound or iterated from
    (`PROMPTS = [[2, 106, 1645]]` ... `for p in PROMPTS: torch.tensor([p])`). Only those made of ints alone."""
    sinks = [
        c.args[0] for c in ast.walk(tree) if isinstance(c, ast.Call) and c.args and callee_name(c.func) in _ID_CONSUMERS
    ]
    sinks += [k.value for c in ast.walk(tree) if isinstance(c, ast.Call) for k in c.keywords if k.arg in _ID_KEYWORDS]
    sinks += _named_ids(tree)
    names = {n for s in sinks for n in _data_names(s)}
    sources = {id(s): s for s in sinks}
    while True:  # names bound from (or iterating over) what flows into a sink flow into it too
        grown = set(names)
        for node in ast.walk(tree):
            targets, value = _binding(node)
            if value is not None and any(isinstance(t, ast.Name) and t.id in names for t in targets):
                sources.setdefault(id(value), value)
                grown |= _data_names(value)
        if grown == names:
            break
        names = grown
    found = {
        id(n): n
        for expr in sources.values()
        for n in _data_nodes(expr)
        if isinstance(n, (ast.List, ast.Tuple)) and n.elts and all(_int_literal(e) for e in n.elts)
    }
    return list(found.values())


# What its name says holds token ids: `"prompt_ids": [2, 106, 1645]` in a request that reaches `torch.tensor` through
# a function's parameter, which the flow above does not follow (a serving script's prompts, past the failure in a
# load: unrecorded, they stayed past a twin's vocabulary, and generate raised IndexError where the bug is fixed).
_IDS_NAME = re.compile(r"(?:^|_)ids$")


def _named_ids(tree: ast.AST) -> list[ast.expr]:
    """Values bound to a parameter, a keyword, a name, an attribute or a dict key whose name ends in `ids`."""
    return [value for name, value in _bound_by_name(tree) if _IDS_NAME.search(name)]


def _data_nodes(expr: ast.AST) -> list[ast.AST]:
    """The nodes whose value becomes part of `expr`'s value: not a call's function or keywords (`max_length=512`),
    not the object a method or attribute is read from, not an index."""
    if isinstance(expr, ast.Call):
        inner = expr.args
    elif isinstance(expr, ast.Attribute):
        inner = []
    elif isinstance(expr, ast.Subscript):
        inner = [expr.value]
    else:
        inner = list(ast.iter_child_nodes(expr))
    return [expr] + [n for child in inner for n in _data_nodes(child)]


def _data_names(expr: ast.AST) -> set[str]:
    return {n.id for n in _data_nodes(expr) if isinstance(n, ast.Name)}


def _binding(node: ast.AST) -> tuple[list[ast.AST], ast.expr | None]:
    if isinstance(node, ast.Assign):
        return [e for t in node.targets for e in ast.walk(t)], node.value
    if isinstance(node, (ast.For, ast.comprehension)):
        return list(ast.walk(node.target)), node.iter
    return [], None


def _int_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _remap_literals(tree: ast.AST, mapping: dict[int, int]) -> None:
    for literal in id_literals(tree):
        for element in literal.elts:
            if isinstance(element, ast.Constant):
                element.value = mapping.get(element.value, element.value)


_ID_DATA = ("input_ids", "labels", "decoder_input_ids")


def _result_ids(result: dict[str, Any]) -> list[int]:
    """The token ids in a recorded tokenizer result (not its attention mask)."""
    if result["type"] in ("BatchEncoding", "dict"):
        return [i for key, value in result["data"].items() if key in _ID_DATA for i in _result_ids(value)]
    return _ints(result.get("values"))


def result_expression(result: dict[str, Any], mapping: dict[int, int], ids: bool = True) -> str:
    """Source for a recorded tokenizer result, its ids mapped: a BatchEncoding of tensors as the call returned it."""
    kind = result["type"]
    if kind == "str":
        return repr(result["value"])
    if kind in ("BatchEncoding", "dict"):
        items = ", ".join(f"{k!r}: {result_expression(v, mapping, k in _ID_DATA)}" for k, v in result["data"].items())
        return f"transformers.BatchEncoding({{{items}}})" if kind == "BatchEncoding" else f"{{{items}}}"
    values = _remapped(result["values"], mapping) if ids else result["values"]
    if kind == "tensor":
        dtype = "" if result["dtype"] == "int64" else f", dtype=torch.{result['dtype']}"
        return f"torch.tensor({values!r}{dtype})"
    return repr(values)


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
    load: Load, shrunk: set[Path_], vocabulary: int | None = None, mapping: dict[int, int] | None = None
) -> dict[str, Any]:
    """The twin's config: the structural fields, with each shrunk field at its tiny value and each tower that goes
    left out; with a `vocabulary`, every vocabulary at that size and every token id mapped into it (`mapping`)."""
    out = copy.deepcopy(structural(load.config, load.defaults))  # the record's dicts are not the twin's to edit
    gone = {p[:-1] for p in shrunk if p[-1] == TOWER_GONE}
    for path in sorted(p for p in shrunk if p[-1] != TOWER_GONE and not any(p[: len(g)] == g for g in gone)):
        _at(out, path[:-1])[path[-1]] = tiny_value(path)
    for path in gone:
        _at(out, path[:-1]).pop(path[-1], None)
    if vocabulary is not None:
        for path, size in vocabularies(load.config).items():
            if size > vocabulary:
                _at(out, path[:-1])[path[-1]] = vocabulary
        for path, value in token_ids(load.config).items():
            small = _remapped(value, mapping or {})
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


def callee_name(func: ast.expr) -> str:
    """`f` of `f(...)` or `x.f(...)` ('' for anything else)."""
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def calls_at(tree: ast.AST, line: int, names: set[str]) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and callee_name(n.func) in names and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]


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
    if callee_name(call.func) in DISPATCHERS:
        set_argument(call, 1, "device_map", literal)
    else:
        set_keyword(call, "device_map", literal)
    set_keyword(call, "max_memory", None)


_STACKS = {"layers", "layer", "blocks", "block", "h"}  # `tower.encoder.layers.5`: a layer's index follows these


def _kept_entries(device_map: dict[str, Any], plan: Plan, shrunk: set[Path_]) -> dict[str, Any]:
    """The map without the entries of what the twin no longer has: a tower that went (`model.vision_tower`,
    `model.embed_vision` for `vision_config`), a tower's layers past the ones it keeps."""
    gone, cut = set(), set()
    for path in shrunk:
        if len(path) >= 3 and path[-1] in (TOWER_GONE, "num_hidden_layers"):
            kind = path[-2].removesuffix("_config")
            (gone if path[-1] == TOWER_GONE else cut).add(kind)

    def kept(key: str) -> bool:
        parts = key.split(".")
        if any(kind in part for kind in gone for part in parts):
            return False
        tower = [i for i, part in enumerate(parts) if any(kind in part for kind in cut)]
        layers = [
            i for i, part in enumerate(parts) if part.isdigit() and tower and i > tower[0] and parts[i - 1] in _STACKS
        ]
        return not layers or int(parts[layers[0]]) < TOWER_LAYERS

    return {k: v for k, v in device_map.items() if kept(k)}


def prelude(plan: Plan, shrunk: set[Path_], imported: set[str] = frozenset()) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(imports, statements): what builds and saves the twins (and twin adapters) in a temp dir, and the imports it
    needs that the script does not have (`imported`: the script's plain `import X` names)."""
    vocabulary = plan.vocabulary if VOCAB_FIELD in shrunk else None
    mapping = plan.mapping() if VOCAB_FIELD in shrunk else {}
    needed = ["tempfile", "transformers"] + (["peft"] if plan.adapters else [])
    needed += ["torch"] if VOCAB_FIELD in shrunk and _renders_tensors(plan) else []
    lines = ["transformers.set_seed(0)", "twin_dir = tempfile.mkdtemp()"]
    for i, load in enumerate(plan.loads):
        fields = {p[1:] for p in shrunk if p[0] == str(i)}
        lines += [
            f"twin = transformers.{load.model_class}(transformers.AutoConfig.for_model("
            f"{load.model_type!r}, **{twin_config(load, fields, vocabulary, mapping)!r}))"
        ]
        generation = _generation_update(load, mapping)
        lines += [f"twin.generation_config.update(**{generation!r})"] if generation else []
        lines.append(f"twin.save_pretrained(twin_dir + '/model{i}')")
        for j, adapter in enumerate(plan.adapters if i == 0 else ()):
            lines.append(
                f"peft.get_peft_model(twin, peft.{adapter.config_class}(**{adapter_config(adapter)!r}))"
                f".save_pretrained(twin_dir + '/adapter{j}')"
            )
    imports = [ast.Import([ast.alias(name)]) for name in needed if name not in imported]
    return imports, ast.parse("\n".join(lines)).body


def _renders_tensors(plan: Plan) -> bool:
    return any("torch.tensor(" in result_expression(t.result, {}) for t in plan.replaceable)


def _generation_update(load: Load, mapping: dict[int, int]) -> dict[str, Any]:
    """The generation config's special ids, mapped, where they differ from what the twin's config gives it (a
    checkpoint's generation config can stop at more ids than its config names)."""
    text = load.config.get("text_config") if isinstance(load.config.get("text_config"), dict) else load.config
    return {k: _remapped(v, mapping) for k, v in load.generation_ids.items() if text.get(k) != v}


def _insert_at(body: list[ast.stmt], first_line: int | None = None) -> int:
    """After the module docstring, `__future__` imports and the leading imports; where statements stand between
    imports (`import os; os.environ[...] = ...; import torch`), after the last import before the statement that holds
    `first_line` (the first load): the twin's own lines use what those imports bind."""
    index = 0
    while index < len(body) and (
        isinstance(body[index], (ast.Import, ast.ImportFrom))
        or (isinstance(body[index], ast.Expr) and isinstance(body[index].value, ast.Constant))
    ):
        index += 1
    if first_line is not None:
        before = [
            i
            for i, stmt in enumerate(body)
            if (stmt.end_lineno or stmt.lineno) < first_line and isinstance(stmt, (ast.Import, ast.ImportFrom))
        ]
        index = max([index, *(i + 1 for i in before)])
    return index


def _replace_tokenizers(tree: ast.Module, plan: Plan, mapping: dict[int, int]) -> None:
    """Each tokenizer call whose result the run recorded becomes that result as a literal, its ids mapped; each read
    of a tokenizer's special id (`tok.pad_token_id`) becomes the mapped id. What is left of the tokenizer (its load)
    is then read by nothing, and the search drops it."""
    names = {_bound_target(tree, line) for line, _ in plan.tokenizers} - {None}
    for tokenized in plan.replaceable:
        call = _tokenizer_call(tree, tokenized, names)
        if call is not None:
            replace_node(tree, call, ast.parse(result_expression(tokenized.result, mapping), mode="eval").body)
    special = {}
    for line, ids in plan.tokenizers:
        special.setdefault(_bound_target(tree, line), {}).update(ids)
    for node in list(ast.walk(tree)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.attr in special.get(node.value.id, {})
        ):
            replace_node(
                tree,
                node,
                ast.Constant(mapping.get(special[node.value.id][node.attr], special[node.value.id][node.attr])),
            )


def _bound_target(tree: ast.Module, line: int) -> str | None:
    """The name a statement at `line` binds (`tok = AutoTokenizer.from_pretrained(...)`)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and node.lineno <= line <= (node.end_lineno or node.lineno)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            return node.targets[0].id
    return None


def _tokenizer_call(tree: ast.Module, tokenized: Tokenized, names: set[str]) -> ast.Call | None:
    """The call at the recorded line: `tok.encode(...)` by its method; for `tok(...)`, a call of a name that a
    recorded tokenizer load bound, or whose name says it is one (`tokenizer(...)`, `self.processor(...)`)."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and n.lineno <= tokenized.line <= (n.end_lineno or n.lineno)
    ]
    if tokenized.method != "__call__":
        calls = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == tokenized.method]
    else:
        calls = [
            c
            for c in calls
            if callee_name(c.func) in names or any(word in callee_name(c.func).lower() for word in ("tok", "processor"))
        ]
    return calls[0] if len(calls) == 1 else None


def twin_source(source: str, plan: Plan, shrunk: set[Path_], literal_maps: bool = True) -> str | None:
    """The script loading tiny twins instead of its checkpoints, or None where a recorded call is not found. With
    the vocabularies shrunk (`VOCAB_FIELD`), the script's token ids are mapped into them and its tokenizer calls
    replaced by what they returned."""
    tree = ast.parse(source)
    for i, load in enumerate(plan.loads):
        calls = calls_at(tree, load.line, LOADERS)
        if not calls:
            return None
        twin_path = ast.parse(f"twin_dir + '/model{i}'", mode="eval").body
        set_argument(calls[0], 0, "pretrained_model_name_or_path", twin_path)
        if literal_maps and (device_map := loaded_map(load)):
            place(calls[0], _kept_entries(device_map, plan, shrunk))
    for j, adapter in enumerate(plan.adapters):
        calls = calls_at(tree, adapter.line, LOADERS)
        if not calls:
            return None
        set_argument(calls[0], 1, "model_id", ast.parse(f"twin_dir + '/adapter{j}'", mode="eval").body)
    for line, device_map in plan.dispatches if literal_maps else ():
        calls = calls_at(tree, line, LOADERS | DISPATCHERS)
        if calls:
            place(calls[0], _kept_entries({k: literal_device(v) for k, v in device_map.items()}, plan, shrunk))
    if VOCAB_FIELD in shrunk:
        mapping = plan.mapping()
        _remap_literals(tree, mapping)
        _replace_tokenizers(tree, plan, mapping)
    imported = {a.asname or a.name for s in tree.body if isinstance(s, ast.Import) for a in s.names}
    imports, statements = prelude(plan, shrunk, imported)
    first_load = min((load.line for load in plan.loads), default=None)
    end = _insert_at(tree.body, first_load)  # the twin is built right after the script's imports, with those it adds
    tree.body[end:end] = [s for s in imports if s.names[0].name != "tempfile"] + statements
    tree.body[header_end(tree.body) : 0] = [s for s in imports if s.names[0].name == "tempfile"]  # stdlib first
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


FirstInteresting = Callable[[Sequence[str]], "int | None"]


@dataclass(frozen=True)
class Rung:
    """One step of the twin's ladder: the fields every twin of this step keeps at their real size (besides what a
    step's own tries keep), named for a person."""

    name: str
    kept: tuple[Path_, ...] = ()


def ladder(plan: Plan) -> list[Rung]:
    """The twins to try, from the most shrunk to the least: what the run never reached where it failed may still be
    read where the bug is fixed (prompt ids past the failure, labels, a file of ids), and a twin whose vocabulary is
    shrunk past them fails there with an artifact of the shrink. Real scale is the step after the last."""
    rungs = [Rung("every dimension, layer and vocabulary shrunk")]
    if VOCAB_FIELD in plan.fields:
        rungs.append(Rung("dimensions and layers shrunk, vocabularies and token ids kept", (VOCAB_FIELD,)))
    return rungs


def scale_down(
    source: str,
    plan: Plan,
    first_interesting: FirstInteresting,
    cut: Callable[[str], list[str]] | None = None,
    on_rung: Callable[..., None] | None = None,
) -> tuple[str, list[Path_]] | None:
    """The smallest twin that is still interesting, and the fields it had to keep at their real size; None when
    no twin is. The ladder's steps in order (`ladder`), each as one batch per layer cut then the uncut twins; then
    delta debugging over the fields kept at real size, and the result checked once more (ddmin assumes the whole
    set is interesting: it need not be, the maps are literal there and were inferred in the original). `cut`:
    further shrinks of a twin's text (its layers), the smallest first. `on_rung(name, shared=True)`: told each step
    before its candidates are judged (the judge says why a step was refused); `shared`: the step's twins share its
    shrink, so that one refused where the bug is fixed refuses the step."""
    fields = plan.fields

    def twin(kept: Sequence[Path_]) -> str | None:
        return twin_source(source, plan, set(fields) - set(kept))

    if twin([]) is None:  # a recorded call is not in the script: no twin of any step
        return None
    for rung in ladder(plan):
        if on_rung is not None:
            on_rung(rung.name)
        found = _first_on_rung(twin, fields, rung, first_interesting, cut)
        if found is not None:
            return found
    if on_rung is not None:  # its twins shrink different fields: a refusal of one says nothing of the others
        on_rung("the fields the failure needs at their real size, found by delta debugging", False)

    def first_kept(candidates: Sequence[list[Path_]]) -> int | None:
        sources = [twin(kept) for kept in candidates]
        found = first_interesting([s for s in sources if s is not None])
        return None if found is None else [i for i, s in enumerate(sources) if s is not None][found]

    kept = ddmin(list(fields), first_kept)
    final = twin(kept)
    return (final, kept) if final is not None and first_interesting([final]) == 0 else None


def _first_on_rung(
    twin: Callable[[Sequence[Path_]], str | None],
    fields: list[Path_],
    rung: Rung,
    first_interesting: FirstInteresting,
    cut: Callable[[str], list[str]] | None,
) -> tuple[str, list[Path_]] | None:
    """The first interesting twin of one step of the ladder, or None."""
    # towers shrunk first, not gone: on two H200s the E4B eval job's twin with both towers gone passed, and delta
    # debugging over its 20 fields took 192 s to find the audio tower needed; with the towers kept (each cut to one
    # small layer) the first twin failed the same way. Leaving them out is then one more candidate.
    # Both in one batch, side by side (the box holds two twins where it held the original).
    towers = [path for path in fields if path[-1] == TOWER_GONE]
    kept = list(rung.kept)
    first = twin([*kept, *towers])
    if first is None:
        return None
    without = twin(kept) if towers else None
    tries = [(without, kept), (first, [*kept, *towers])] if without is not None else [(first, [*kept, *towers])]
    # the twin's layers cut first: every cold run after it (the guard's, the verification's) and the search's
    # first candidates then build a few layers, not all of them. A batch per cut, the smallest first; then uncut
    cuts = [[c for c in (cut(text) if cut is not None else []) if c != text] for text, _ in tries]
    batches = [
        [(shorter[step], kept) for shorter, (_, kept) in zip(cuts, tries, strict=True) if step < len(shorter)]
        for step in range(max(map(len, cuts)))
    ]
    for batch in [*batches, tries]:
        found = first_interesting([text for text, _ in batch])
        if found is not None:
            return batch[found]
    return None
