"""A twin's source: the script rewritten to build the twin (its config from the plan) where it loaded the real
model, with the device maps the original run inferred written as literals, the tokenizers' calls replaced by what
they returned, and the ids the script holds mapped into the twin's vocabulary."""

from __future__ import annotations

import ast
from typing import Any

from ..source import header_end, replace_node
from .ids import VOCAB_FIELD, callee_name, remap_literals, remapped, result_expression
from .plan import (
    DISPATCHERS,
    LOADERS,
    TOWER_GONE,
    TOWER_LAYERS,
    Load,
    Path_,
    Plan,
    Tokenized,
    adapter_config,
    twin_config,
)


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
    spelled = VOCAB_FIELD in plan.fields and VOCAB_FIELD not in shrunk  # kept: the search may shrink it later
    needed = ["tempfile", "transformers"] + (["peft"] if plan.adapters else [])
    needed += ["torch"] if VOCAB_FIELD in shrunk and _renders_tensors(plan) else []
    lines = ["transformers.set_seed(0)", "twin_dir = tempfile.mkdtemp()"]
    for i, load in enumerate(plan.loads):
        fields = {p[1:] for p in shrunk if p[0] == str(i)}
        lines += [
            f"twin = transformers.{load.model_class}(transformers.AutoConfig.for_model("
            f"{load.model_type!r}, **{twin_config(load, fields, vocabulary, mapping, spelled)!r}))"
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
    return {k: remapped(v, mapping) for k, v in load.generation_ids.items() if text.get(k) != v}


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
        remap_literals(tree, mapping)
        _replace_tokenizers(tree, plan, mapping)
    imported = {a.asname or a.name for s in tree.body if isinstance(s, ast.Import) for a in s.names}
    imports, statements = prelude(plan, shrunk, imported)
    first_load = min((load.line for load in plan.loads), default=None)
    end = _insert_at(tree.body, first_load)  # the twin is built right after the script's imports, with those it adds
    tree.body[end:end] = [s for s in imports if s.names[0].name != "tempfile"] + statements
    tree.body[header_end(tree.body) : 0] = [s for s in imports if s.names[0].name == "tempfile"]  # stdlib first
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
