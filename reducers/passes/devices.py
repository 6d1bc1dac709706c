"""Device maps and layer stacks: a stack of layers cut to one per run of its placement (and kind), the fields that
name layers cut with it, a literal device map coarsened, and, last, a map and a per-layer list written in their
shortest form (which the cutting passes read back: `_map_value`, `constant_list`)."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator

from ..source import replace_node
from .common import _edits, _nth


_DEVICES = {"cpu", "disk", "meta", "cuda", "mps"}


def _device_map(node: ast.Dict, least: int = 2) -> dict[str, object] | None:
    """A dict literal that reads as a device map: dotted module names (or "") to devices (0, "cpu", "disk", "cuda:1");
    `least` entries at least (one alone could be anything)."""
    if len(node.keys) < least or not all(isinstance(k, ast.Constant) and type(k.value) is str for k in node.keys):
        return None
    values = [v.value if isinstance(v, ast.Constant) else None for v in node.values]
    if not all(type(v) is int or (type(v) is str and v.split(":")[0] in _DEVICES) for v in values):
        return None
    keys = [k.value for k in node.keys]
    # a config's ints are no GPU indices: `{'vocab_size': 128, 'hidden_size': 64}` was "coarsened" to `{'': 128, ...}`
    if not any(type(v) is str for v in values) and not any(k == "" or "." in k for k in keys):
        return None
    return dict(zip(keys, values, strict=False))


def _collapsed(device_map: dict[str, object]) -> dict[str, object]:
    """Sibling entries on one device folded into their parent, repeatedly (`layers.6.mlp`, `layers.6.norm`, both on
    disk, become `layers.6`): where the map listed every child, the same placement in fewer entries."""
    while True:
        parents: dict[str, set] = {}
        for key, device in device_map.items():
            if "." in key:
                parents.setdefault(key.rsplit(".", 1)[0], set()).add(repr(device))
        same = {
            p
            for p, devices in parents.items()
            if len(devices) == 1 and sum(k.rsplit(".", 1)[0] == p for k in device_map if "." in k) > 1
        }
        if not same:
            return device_map
        folded: dict[str, object] = {}
        for key, device in device_map.items():
            parent = key.rsplit(".", 1)[0] if "." in key else None
            folded[parent if parent in same else key] = device
        device_map = folded


_LAYER_KEY = re.compile(r"^(.*\.)?layers\.(\d+)(\..+)?$")


def _layer_stack(device_map: dict[str, object]) -> tuple[str, list[tuple]] | None:
    """(prefix, each layer's placement) where the map places `PREFIX.layers.N` (whole, or split into submodule
    entries) for every N = 0..L-1; None otherwise."""
    stacks: dict[str, dict[int, list]] = {}
    for key, device in device_map.items():
        if match := _LAYER_KEY.match(key):
            stacks.setdefault(match[1] or "", {}).setdefault(int(match[2]), []).append((match[3] or "", repr(device)))
    for prefix, layers in stacks.items():
        if sorted(layers) == list(range(len(layers))):
            return prefix, [tuple(sorted(layers[i])) for i in range(len(layers))]
    return None


def _stack_configs(tree: ast.Module, layers: int | None) -> Iterator[dict[str, ast.expr]]:
    """The configs written with `num_hidden_layers=L` (any L for None), as field -> value node: a dict literal's
    string keys or a call's keywords (`{'num_hidden_layers': 12}`, `LlamaConfig(num_hidden_layers=12)`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fields = {k.arg: k.value for k in node.keywords if k.arg}
        elif isinstance(node, ast.Dict):
            fields = {
                k.value: v
                for k, v in zip(node.keys, node.values, strict=False)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
        else:
            continue
        count = fields.get("num_hidden_layers")
        if isinstance(count, ast.Constant) and type(count.value) is int and layers in (None, count.value):
            yield fields


def _layer_kinds(tree: ast.Module, layers: int) -> list[str | None]:
    """The `layer_types` written beside `num_hidden_layers=L` (a layer of another kind is not interchangeable: Gemma 4
    forces its last layer to full attention and wants each shared kind produced before), or no kinds."""
    for fields in _stack_configs(tree, layers):
        kinds = constant_list(fields.get("layer_types"))
        if kinds is not None and len(kinds) == layers:
            return kinds
    return [None] * layers


def constant_list(node: ast.AST | None) -> list | None:
    """The value of a list of constants written as a literal or compactly (`['s'] * 5 + ['f']`, `[a, b] * 7`: what
    `compact_lists` writes); None for anything else."""
    if isinstance(node, ast.List) and all(isinstance(e, ast.Constant) for e in node.elts):
        return [e.value for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = constant_list(node.left), constant_list(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for items, times in ((node.left, node.right), (node.right, node.left)):
            if isinstance(times, ast.Constant) and type(times.value) is int and 0 <= times.value <= 4096:
                unit = constant_list(items)
                if unit is not None:
                    return unit * times.value
    return None


def _cut_layer_field(key: str, value: ast.expr, layers: int, keep: list[int]) -> None:
    """One field beside `num_hidden_layers`, made to describe the kept layers: a list of L entries (`layer_types`)
    keeps theirs; a dict keyed by layer index (Gemma 4's `per_layer_config`, '05') keeps theirs, renumbered; a
    count of trailing layers (`num_kv_shared_layers`: Gemma 4 shares the KV of its last K layers) counts the kept
    ones among them. Gemma 4's config refuses a twin whose fields name layers it no longer has."""
    if isinstance(value, ast.List) and len(value.elts) == layers:
        value.elts = [value.elts[i] for i in keep]
    elif (items := constant_list(value)) is not None and len(items) == layers:  # written compactly: a literal again
        _replace_node(value, ast.List([ast.Constant(items[i]) for i in keep], ast.Load()))
    elif (
        isinstance(value, ast.Dict)
        and value.keys
        and all(isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.isdigit() for k in value.keys)
    ):
        pairs = [
            (int(k.value), len(k.value), v)
            for k, v in zip(value.keys, value.values, strict=False)
            if int(k.value) in keep
        ]
        value.keys = [ast.Constant(f"{keep.index(i):0{width}d}") for i, width, _ in pairs]
        value.values = [v for _, _, v in pairs]
    elif (
        key.startswith("num_")
        and key.endswith("_layers")
        and isinstance(value, ast.Constant)
        and type(value.value) is int
        and 0 < value.value < layers
    ):
        value.value = sum(i >= layers - value.value for i in keep)


def _replace_node(old: ast.AST, new: ast.AST) -> None:
    """Turn `old` into `new` in place (its parent is not at hand)."""
    old.__class__ = new.__class__
    old.__dict__.clear()
    old.__dict__.update(new.__dict__)


def _cut_stack(tree: ast.Module, layers: int, keep: list[int]) -> bool:
    """`num_hidden_layers=L` (a keyword or a dict entry) becomes len(keep), and the fields beside it that name layers
    follow (`_cut_layer_field`). False where no such count is written."""
    configs = list(_stack_configs(tree, layers))
    for fields in configs:
        for key, value in fields.items():
            if key == "num_hidden_layers":
                value.value = len(keep)
            else:
                _cut_layer_field(key, value, layers, keep)
    return bool(configs)


def fewer_layers(tree: ast.Module, per_kind: bool = True) -> Iterator[ast.Module]:
    """A stack of L layers that a literal device map places in runs (a twin's 12 layers: 6 on cpu, then 6 on disk)
    cut to one layer per run (of one placement and one `layer_type`): the config's `num_hidden_layers` and the
    fields naming layers cut to match, the map's layer entries renumbered. Before it (`per_kind`), where smaller:
    one layer of each type per run of a placement, the last of each, a layer that shares another's KV being a type of
    its own (E4B's alternating types left 15 of 42 layers as runs). Each run's device is kept, so the placement the
    failure needs survives (the oracle says whether it does)."""
    maps = [n for n in ast.walk(tree) if isinstance(n, ast.Dict)]
    for index, node in enumerate(maps):
        device_map = _device_map(node)
        stack = _layer_stack(device_map) if device_map else None
        if stack is None:
            continue
        prefix, placed = stack
        layers = len(placed)
        order = list(zip(placed, _layer_kinds(tree, layers), strict=False))
        runs = [i for i in range(layers) if i == 0 or order[i] != order[i - 1]]
        cuts = [runs]
        if per_kind:  # a layer that reads another's KV is a kind of its own
            shared = _shared_layers(tree, layers)
            kinds = _kinds_per_run([(p, (k, s)) for (p, k), s in zip(order, shared, strict=True)])
            cuts = [kinds, runs] if len(kinds) < len(runs) else cuts
        for keep in cuts:
            if len(keep) == layers:
                continue
            new = copy.deepcopy(tree)
            if not _cut_stack(new, layers, keep):
                continue
            renamed = {}
            for key, device in device_map.items():
                match = _LAYER_KEY.match(key)
                if match is None or (match[1] or "") != prefix:
                    renamed[key] = device
                elif int(match[2]) in keep:
                    renamed[f"{prefix}layers.{keep.index(int(match[2]))}{match[3] or ''}"] = device
            if replace_node(new, _nth(new, ast.Dict, index), ast.parse(repr(renamed), mode="eval").body):
                yield new


def _shared_layers(tree: ast.Module, layers: int) -> list[bool]:
    """Which layers read the KV of an earlier one (Gemma 4's last `num_kv_shared_layers`): such a layer has no KV
    projections of its own, so a cut that keeps only shared layers on a device keeps none of the weights placed there
    that the others have."""
    for fields in _stack_configs(tree, layers):
        count = fields.get("num_kv_shared_layers")
        if isinstance(count, ast.Constant) and type(count.value) is int and 0 < count.value <= layers:
            return [i >= layers - count.value for i in range(layers)]
    return [False] * layers


def _kinds_per_run(order: list[tuple]) -> list[int]:
    """The last layer of each kind within each run of one placement, in layer order: the model's last layer (Gemma 4
    forces it to full attention) stays last."""
    keep: list[int] = []
    start = 0
    for end in range(1, len(order) + 1):
        if end == len(order) or order[end][0] != order[start][0]:
            keep += sorted({order[i][1]: i for i in range(start, end)}.values())
            start = end
    return keep


def coarsen_device_maps(tree: ast.Module) -> Iterator[ast.Module]:
    """A literal device map (what the scale-down phase writes: 27 entries for a 12-layer model) in fewer entries: the
    most common device as the root entry `""` with the others kept, or siblings on one device folded into their
    parent. Each is one candidate; dropping entries one at a time (`drop_dict_entries`) costs a run per entry."""

    def coarser(node: ast.AST) -> list:
        device_map = _device_map(node)
        if device_map is None:
            return []
        common = max(set(map(repr, device_map.values())), key=list(map(repr, device_map.values())).count)
        rooted = {"": ast.literal_eval(common), **{k: v for k, v in device_map.items() if repr(v) != common}}
        options = [rooted, _collapsed(device_map)]
        return [ast.parse(repr(m), mode="eval").body for m in options if len(m) < len(device_map)]

    yield from _edits(tree, ast.Dict, coarser)


def fewer_unplaced_layers(tree: ast.Module) -> Iterator[ast.Module]:
    """A stack that no literal map places layer by layer (a map coarsened to its root entry, a model on one device)
    cut to one layer per run of its `layer_types`, then to its first half: `num_hidden_layers` and every field that
    names layers cut with it (`layer_types`, `per_layer_config`, `num_kv_shared_layers`), so the config never
    describes layers it does not have. Where a literal map does place the layers, `fewer_layers` cuts both."""
    placed = {
        len(stack[1])
        for n in ast.walk(tree)
        if isinstance(n, ast.Dict) and (m := _device_map(n)) and (stack := _layer_stack(m))
    }
    counts = sorted({f["num_hidden_layers"].value for f in _stack_configs(tree, None)} - placed)
    for layers in counts:
        if not isinstance(layers, int) or layers < 2:
            continue
        kinds = _layer_kinds(tree, layers)
        by_kind = [i for i in range(layers) if i == 0 or kinds[i] != kinds[i - 1]]
        for keep in dict.fromkeys((tuple(by_kind), tuple(range((layers + 1) // 2)))):
            if len(keep) < layers:
                new = copy.deepcopy(tree)
                _cut_stack(new, layers, list(keep))
                yield new


_NUMBERED_KEY = re.compile(r"^(.*\.)(\d+)((?:\..*)?)$")  # `model.layers.12.mlp`: the last number in the path


def shorten_device_maps(tree: ast.Module) -> Iterator[ast.Module]:
    """A device map written in its shortest form: a literal, or a comprehension over each run of numbered entries on
    one device and a literal for the rest, joined with `|` in the map's own order (`{f'model.layers.{i}': 'disk' for
    i in range(2, 9)} | {'lm_head': 'cpu'}`). A map written so already is read back (`_map_value`), so what later
    passes leave of it (a `range(1)`) is written again. Late in the list: the passes that cut and coarsen maps read
    literals."""
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.expr)]
    inner = {
        id(side) for n in nodes if isinstance(n, ast.BinOp) and _map_value(n) is not None for side in (n.left, n.right)
    }
    for index, node in enumerate(nodes):
        value = _map_value(node) if id(node) not in inner else None
        if value is None or len(value) < 2:
            continue
        forms = [ast.parse(repr(value), mode="eval").body, _map_expression(list(value.items()))]
        best = min((f for f in forms if f is not None), key=lambda f: len(ast.unparse(f)))
        if len(ast.unparse(best)) < len(ast.unparse(node)):
            new = copy.deepcopy(tree)
            if replace_node(new, [n for n in ast.walk(new) if isinstance(n, ast.expr)][index], best):
                yield new


def _map_value(node: ast.AST) -> dict[str, object] | None:
    """The device map a literal, a numbered comprehension (`{f'm.layers.{i}': 'disk' for i in range(2, 9)}`) or a
    `|` of them stands for; None for anything else."""
    if isinstance(node, ast.Dict):
        return _device_map(node, least=1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _map_value(node.left), _map_value(node.right)
        return None if left is None or right is None else left | right
    if not (
        isinstance(node, ast.DictComp)
        and len(node.generators) == 1
        and not node.generators[0].ifs
        and isinstance(node.generators[0].target, ast.Name)
        and isinstance(node.key, ast.JoinedStr)
        and isinstance(node.value, ast.Constant)
    ):
        return None
    loop, index = node.generators[0], node.generators[0].target.id
    bounds = loop.iter.args if isinstance(loop.iter, ast.Call) and ast.unparse(loop.iter.func) == "range" else None
    if (
        not bounds
        or len(bounds) > 2
        or loop.iter.keywords
        or not all(isinstance(b, ast.Constant) and type(b.value) is int for b in bounds)
    ):
        return None
    parts = node.key.values
    if not (
        all(
            isinstance(p, ast.Constant)
            or (
                isinstance(p, ast.FormattedValue)
                and isinstance(p.value, ast.Name)
                and p.value.id == index
                and p.conversion == -1
                and p.format_spec is None
            )
            for p in parts
        )
        and sum(isinstance(p, ast.FormattedValue) for p in parts) == 1
    ):
        return None
    first, stop = (0, bounds[0].value) if len(bounds) == 1 else (bounds[0].value, bounds[1].value)
    entries = {
        "".join(str(i) if isinstance(p, ast.FormattedValue) else p.value for p in parts): node.value.value
        for i in range(first, min(stop, first + 4096))
    }
    return _device_map(ast.parse(repr(entries), mode="eval").body, least=0) if entries else {}


def _map_expression(entries: list[tuple[str, object]], least: int = 3) -> ast.expr | None:
    """The entries as `part | part | ...`: a comprehension for each run of at least `least` entries whose keys differ
    only in one consecutive number and whose device is the same, a dict literal for what lies between."""
    parts: list[ast.expr] = []
    plain: list[tuple[str, object]] = []
    index = 0
    while index < len(entries):
        end = index + 1
        match = _NUMBERED_KEY.match(entries[index][0])
        while (
            match
            and end < len(entries)
            and (later := _NUMBERED_KEY.match(entries[end][0]))
            and (later[1], later[3], entries[end][1]) == (match[1], match[3], entries[index][1])
            and int(later[2]) == int(match[2]) + end - index
            and later[2] == str(int(later[2]))
        ):
            end += 1
        if match and end - index >= least and match[2] == str(int(match[2])):
            if plain:
                parts.append(ast.parse(repr(dict(plain)), mode="eval").body)
                plain = []
            parts.append(_numbered_run(match[1], match[3], int(match[2]), end - index, entries[index][1]))
            index = end
        else:
            plain.append(entries[index])
            index += 1
    if not any(isinstance(p, ast.DictComp) for p in parts):
        return None
    if plain:
        parts.append(ast.parse(repr(dict(plain)), mode="eval").body)
    joined = parts[0]
    for part in parts[1:]:
        joined = ast.BinOp(joined, ast.BitOr(), part)
    return joined


def _numbered_run(prefix: str, suffix: str, first: int, count: int, device: object) -> ast.DictComp:
    bounds = f"{first + count}" if first == 0 else f"{first}, {first + count}"
    key = f"f{(prefix + '{i}' + suffix)!r}"
    return ast.parse(f"{{{key}: {device!r} for i in range({bounds})}}", mode="eval").body


def compact_lists(tree: ast.Module) -> Iterator[ast.Module]:
    """A literal list of constants with repeats written shorter: `['s', 's', 's', 's', 's', 'f'] * 7` as
    `(['s'] * 5 + ['f']) * 7` (a 14-entry `layer_types` was one long line). Only where the text is shorter; the
    passes that cut per-layer lists read this form too (`constant_list`)."""

    def shorter(node: ast.AST) -> list:
        items = constant_list(node)
        if items is None or len(items) < 4:
            return []
        best = min(_compact_forms(items), key=lambda e: len(ast.unparse(e)), default=None)
        return [best] if best is not None and len(ast.unparse(best)) < len(ast.unparse(node)) else []

    yield from _edits(tree, ast.List, shorter)


def _compact_forms(items: list) -> list[ast.expr]:
    forms = [_runs(items)]
    for period in range(1, len(items) // 2 + 1):
        if len(items) % period == 0 and items[:period] * (len(items) // period) == items:
            times = ast.Constant(len(items) // period)
            forms += [
                ast.BinOp(ast.List([ast.Constant(v) for v in items[:period]], ast.Load()), ast.Mult(), times),
                ast.BinOp(_runs(items[:period]), ast.Mult(), times),
            ]
            break
    return forms


def _runs(items: list) -> ast.expr:
    """`['a'] * 3 + ['b', 'c']`: each run of 3 or more equal items repeated, the others listed."""
    parts: list[ast.expr] = []
    loose: list = []
    index = 0
    while index < len(items):
        end = index
        while end < len(items) and items[end] == items[index] and type(items[end]) is type(items[index]):
            end += 1
        if end - index >= 3:
            if loose:
                parts.append(ast.List([ast.Constant(v) for v in loose], ast.Load()))
                loose = []
            parts.append(
                ast.BinOp(ast.List([ast.Constant(items[index])], ast.Load()), ast.Mult(), ast.Constant(end - index))
            )
        else:
            loose += items[index:end]
        index = end
    if loose:
        parts.append(ast.List([ast.Constant(v) for v in loose], ast.Load()))
    joined = parts[0]
    for part in parts[1:]:
        joined = ast.BinOp(joined, ast.Add(), part)
    return joined
