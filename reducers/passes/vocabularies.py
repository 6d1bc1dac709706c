"""Arguments, dict entries and literals, the small edits the search sweeps: a keyword or argument dropped, a dict
literal's entries dropped one or a run at a time, an integer shrunk, an option read made a literal. A vocabulary,
the token ids beside it and a twin's dimensions stay as written (`_vocabulary_fields`): one of them dropped or
shrunk alone indexes past a table where the bug is fixed. A twin's vocabularies shrink only all together, with every
id mapped into them (`shrink_twin_vocabularies`)."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from ..scale import SHRINK, TOKEN_ID, VOCABULARY, id_literals, small_ids, vocabulary_floor, vocabulary_size
from ..scale.ids import callee_name, ints, remap_literals, remapped
from ..source import replace_node
from .common import _edits, _nth
from .devices import _stack_configs, constant_list
from .hygiene import _bound_name, _imports


def constant_attributes(tree: ast.Module) -> Iterator[ast.Module]:
    """An option read like `args.hidden` becomes a literal (1, then None): parsers and configs can go. Not a module's
    attribute (`torch.bfloat16`: dropping the argument says the same), nor one that is called or read further
    (`torch.tensor(...)` as `1(...)`, `cfg.sizes[0]` as `None[0]`): those only fail otherwise, a run each (each
    pass's candidates and seconds: `docs/benchmarks.md`, "Reducing at real scale")."""
    modules = {_bound_name(alias) for node in _imports(tree) for alias in node.names}
    used = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    used |= {id(n.value) for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Subscript))}
    wanted = [
        i
        for i, n in enumerate(n for n in ast.walk(tree) if isinstance(n, ast.Attribute))
        if isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id not in modules
        and id(n) not in used
    ]
    for index in wanted:
        for literal in (1, None):
            new = copy.deepcopy(tree)
            if replace_node(new, _nth(new, ast.Attribute, index), ast.Constant(literal)):
                yield new


def _twin_configs(tree: ast.AST) -> set[str]:
    """The dict literals (by their dump) that configure a twin: `AutoConfig.for_model(type, **{...})` as the
    scale-down writes it, and every config nested in one (a tower's)."""
    configs, _ = _twin_dicts(tree)
    return {ast.dump(d) for d in configs}


def _vocabulary_fields(names: list[str | None], twin: bool = False) -> set[int]:
    """Positions of the fields that must stay as written in a config with a vocabulary (`vocab_size`): the
    vocabularies and the token ids, the dimensions and the layer count. A twin's vocabularies were shrunk together,
    with every id that indexes them: one of them dropped or shrunk alone (the per-layer one shrunk to 4 while
    generate's ids went past it) indexes past a table where the bug is fixed. Dropped all together, as
    `drop_arguments` may drop a whole `**config`, the defaults agree. A dimension dropped is the class's default:
    a twin whose `hidden_size` went back to 2304 had 15M parameters in one layer, not 40K. `twin`: a twin's config
    (`_twin_configs`), a tower's among them, whose dimensions stay whether or not it has a vocabulary."""
    if not twin and not any(name in VOCABULARY for name in names):
        return set()
    return {
        i
        for i, name in enumerate(names)
        if name in VOCABULARY
        or name in SHRINK
        or name in ("num_hidden_layers", "text_config")
        or (name and TOKEN_ID.match(name))
        or (twin and name and name.endswith("_config"))  # a tower's config dropped is the class's full-size tower
    }


def _dict_names(node: ast.Dict) -> list[str | None]:
    return [k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None for k in node.keys]


def drop_arguments(tree: ast.Module) -> Iterator[ast.Module]:
    """Each keyword, then each positional argument from the last, is removed (back to its default); a vocabulary and
    the token ids beside it stay (`_vocabulary_fields`), and so does a twin's `**config` (without it, the class's
    default sizes: a model of billions of parameters built for a candidate that the time budget then stops)."""
    twins = _twin_configs(tree)

    def holds_twin(node: ast.AST) -> bool:  # the config itself, or the `for_model(...)` call that takes it
        return any(isinstance(d, ast.Dict) and ast.dump(d) in twins for d in ast.walk(node))

    def fewer(call: ast.AST) -> list:
        options = []
        fixed = _vocabulary_fields([k.arg for k in call.keywords])
        fixed |= {i for i, k in enumerate(call.keywords) if holds_twin(k.value)}
        for k in (k for k in range(len(call.keywords)) if k not in fixed):
            options.append(ast.Call(call.func, call.args, call.keywords[:k] + call.keywords[k + 1 :]))
        for k in reversed(range(len(call.args))):
            if not holds_twin(call.args[k]):
                options.append(ast.Call(call.func, call.args[:k] + call.args[k + 1 :], call.keywords))
        return options

    yield from _edits(tree, ast.Call, fewer)


def simplify_constants(tree: ast.Module) -> Iterator[ast.Module]:
    """Integers shrink (to 0, 1, then halves). An argument of a call shrinks to 1 at the least: `Linear4bit(0, 0)`
    reproduces as well as `Linear4bit(8, 8)`, and no maintainer wants to read it. Floats stay: they save no line,
    and they are tolerances (`max_loss_drift: 1e-3` shrunk to 0.0 made a check that fails on rounding noise)."""
    in_calls = {
        id(a)
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        for a in [*call.args, *(k.value for k in call.keywords)]
    }
    # a twin's dimension fields (`{'hidden_size': 64}`) stay at their tiny value: `hidden_size: 0` passed the oracle
    # where the failure never reads it, and reads as a broken model to a maintainer
    dimensions = {
        id(v): SHRINK[k.value]
        for d in ast.walk(tree)
        if isinstance(d, ast.Dict)
        for k, v in zip(d.keys, d.values, strict=False)
        if isinstance(k, ast.Constant) and k.value in SHRINK
    }
    # a vocabulary and the ids beside it never shrink (`_vocabulary_fields`); nor does a layer count that per-layer
    # fields follow (`fewer_unplaced_layers` cuts both)
    fixed = {id(n) for v in _fixed_values(tree) for n in ast.walk(v)}

    def smaller(node: ast.AST) -> list:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int) or id(node) in fixed:
            return []
        floor = (1,) if id(node) in in_calls and value > 0 else (0, 1)
        least = max(min(floor), dimensions.get(id(node), min(floor)))
        return [
            ast.Constant(v) for v in dict.fromkeys((*floor, least, value // 2)) if abs(v) < abs(value) and v >= least
        ]

    # the call-argument test needs the node identities of this tree, which _edits copies: filter here instead
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    for target, original in enumerate(nodes):
        for _choice, replacement in enumerate(smaller(original)):
            new = copy.deepcopy(tree)
            node = _nth(new, ast.Constant, target)
            if replace_node(new, node, replacement):
                yield new


def _fixed_values(tree: ast.Module) -> list[ast.expr]:
    """The values no pass may shrink or drop: a vocabulary and the ids beside it (in a dict or a call's keywords),
    and a layer count written beside per-layer fields."""
    out = []
    twins = _twin_configs(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            out += [node.values[i] for i in _vocabulary_fields(_dict_names(node), ast.dump(node) in twins)]
        elif isinstance(node, ast.Call):
            out += [node.keywords[i].value for i in _vocabulary_fields([k.arg for k in node.keywords])]
    for fields in _stack_configs(tree, None):
        count = fields["num_hidden_layers"].value
        if any(_names_layers(value, count) for key, value in fields.items() if key != "num_hidden_layers"):
            out.append(fields["num_hidden_layers"])
    return out


def _names_layers(value: ast.expr, layers: int) -> bool:
    """A field written per layer: a list of one entry per layer, or a dict keyed by layer index."""
    items = constant_list(value)
    by_index = (
        isinstance(value, ast.Dict)
        and bool(value.keys)
        and all(isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.isdigit() for k in value.keys)
    )
    return (items is not None and len(items) == layers) or by_index


def drop_dict_entries(tree: ast.Module) -> Iterator[ast.Module]:
    """A dict literal loses one entry (configs, device maps): `{'0': 'disk', '1': 'cpu'}` becomes `{'0': 'disk'}`;
    a vocabulary and the ids beside it stay (`_vocabulary_fields`)."""

    twins = _twin_configs(tree)

    def fewer(node: ast.AST) -> list:
        if len(node.keys) < 2 or any(k is None for k in node.keys):
            return []
        fixed = _vocabulary_fields(_dict_names(node), ast.dump(node) in twins)
        return [
            ast.Dict(node.keys[:i] + node.keys[i + 1 :], node.values[:i] + node.values[i + 1 :])
            for i in range(len(node.keys))
            if i not in fixed
        ]

    yield from _edits(tree, ast.Dict, fewer)


def drop_dict_runs(tree: ast.Module) -> Iterator[ast.Module]:
    """A dict literal of 4 or more entries loses a run of them, halves first, then quarters, down to pairs: a twin's
    config of 12 fields of which the failure reads 2 goes in a few candidates, where one entry at a time
    (`drop_dict_entries`, after it) takes one candidate per field."""
    twins = _twin_configs(tree)

    def fewer(node: ast.AST) -> list:
        n = len(node.keys)
        if n < 4 or any(k is None for k in node.keys):
            return []
        fixed = _vocabulary_fields(_dict_names(node), ast.dump(node) in twins)
        out, size = [], n // 2
        while size >= 2:
            for start in range(0, n, size):
                keep = [i for i in range(n) if not start <= i < start + size or i in fixed]
                if len(keep) < n:
                    out.append(ast.Dict([node.keys[i] for i in keep], [node.values[i] for i in keep]))
            size //= 2
        return out

    yield from _edits(tree, ast.Dict, fewer)


def shrink_twin_vocabularies(tree: ast.Module) -> Iterator[ast.Module]:
    """A twin whose vocabularies the scale-down kept at their real size (where the bug is fixed the script went on
    to ids the failing run never reached) gets them all shrunk together, in one candidate, every id the twin's
    configs and the script's id literals hold mapped into them, as the scale-down maps them. Once the slice has cut
    what read those ids, the good path takes it, and every later candidate builds, saves and loads tables of a few
    hundred rows instead of the real vocabulary's."""
    new = copy.deepcopy(tree)
    configs, updates = _twin_dicts(new)
    # the twin's own sizes set aside: the script's ask for a floor (`vocabulary_floor`), the twin's do not
    written = [(v, v.value) for d in configs for k, v in zip(_dict_names(d), d.values, strict=True) if _size(k, v)]
    for node, _ in written:
        node.value = 0
    ids = {i for d in configs + updates for name, v in _int_fields(d) if TOKEN_ID.match(name) for i in ints(v)}
    ids |= {e.value for literal in id_literals(new) for e in literal.elts if isinstance(e, ast.Constant)}
    ids = frozenset(i for i in ids if i >= 0)
    size = max(vocabulary_size(ids), vocabulary_floor(ast.unparse(new)))
    if not any(real > size for _, real in written):
        return
    for node, real in written:
        node.value = min(real, size)
    mapping = small_ids(ids, size)
    for d in configs + updates:
        for name, value in zip(_dict_names(d), d.values, strict=True):
            if name and TOKEN_ID.match(name) and (literal := _literal(value)) is not None:
                replace_node(new, value, ast.parse(repr(remapped(literal, mapping)), mode="eval").body)
    remap_literals(new, mapping)
    yield new


def _size(name: str | None, value: ast.expr) -> bool:
    """A vocabulary's size written as an int literal."""
    return name in VOCABULARY and isinstance(value, ast.Constant) and type(value.value) is int


def _twin_dicts(tree: ast.AST) -> tuple[list[ast.Dict], list[ast.Dict]]:
    """The dict literals that configure a twin (`AutoConfig.for_model(type, **{...})` and the configs nested in it)
    and those of `twin.generation_config.update(**{...})` (the special ids generate stops at)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    configs = [d for c in calls if callee_name(c.func) == "for_model" for d in ast.walk(c) if isinstance(d, ast.Dict)]
    updates = [
        k.value
        for c in calls
        if callee_name(c.func) == "update" and "generation_config" in ast.unparse(c.func)
        for k in c.keywords
        if k.arg is None and isinstance(k.value, ast.Dict)
    ]
    return [d for d in configs if None not in d.keys], [d for d in updates if None not in d.keys]


def _literal(node: ast.expr) -> object | None:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _int_fields(node: ast.Dict) -> list[tuple[str, object]]:
    """(name, value) of a dict literal's string keys whose value is an int or a list of ints, as written."""
    out = []
    for key, value in zip(node.keys, node.values, strict=True):
        literal = _literal(value)
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and (type(literal) is int or ints(literal)):
            out.append((key.value, literal))
    return out
