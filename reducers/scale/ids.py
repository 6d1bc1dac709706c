"""The vocabulary a twin shrinks to and the token ids mapped into it: the vocabulary fields and id fields of a
config, the literals and data in the script that hold ids, and the size the script's own numbers ask for."""

from __future__ import annotations

import ast
import re
from typing import Any

Path_ = tuple[str, ...]  # a field's place in a nested config: ("text_config", "hidden_size")

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


def ints(value: Any) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [i for item in value for i in ints(item)]
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
            out.update({(*prefix, k): v for k, v in node.items() if TOKEN_ID.match(k) and ints(v)})
    return out


def vocabulary_size(ids: frozenset[int]) -> int:
    """The twin's vocabulary: a power of two that holds every id the run used, at least SMALLEST_VOCABULARY."""
    return max(SMALLEST_VOCABULARY, 1 << max(0, len(ids) - 1).bit_length())


def small_ids(ids: frozenset[int], size: int) -> dict[int, int]:
    """Each id's place in a vocabulary of `size`: an id that fits keeps its value (pad 0, eos 1, bos 2 stay), the
    others take the free places in order. The same id maps to the same small id everywhere."""
    free = iter(sorted(set(range(size)) - ids))
    return {i: (i if i < size else next(free)) for i in sorted(ids)}


def remapped(value: Any, mapping: dict[int, int]) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(remapped(v, mapping) for v in value)
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


def remap_literals(tree: ast.AST, mapping: dict[int, int]) -> None:
    for literal in id_literals(tree):
        for element in literal.elts:
            if isinstance(element, ast.Constant):
                element.value = mapping.get(element.value, element.value)


_ID_DATA = ("input_ids", "labels", "decoder_input_ids")


def result_ids(result: dict[str, Any]) -> list[int]:
    """The token ids in a recorded tokenizer result (not its attention mask)."""
    if result["type"] in ("BatchEncoding", "dict"):
        return [i for key, value in result["data"].items() if key in _ID_DATA for i in result_ids(value)]
    return ints(result.get("values"))


def result_expression(result: dict[str, Any], mapping: dict[int, int], ids: bool = True) -> str:
    """Source for a recorded tokenizer result, its ids mapped: a BatchEncoding of tensors as the call returned it."""
    kind = result["type"]
    if kind == "str":
        return repr(result["value"])
    if kind in ("BatchEncoding", "dict"):
        items = ", ".join(f"{k!r}: {result_expression(v, mapping, k in _ID_DATA)}" for k, v in result["data"].items())
        return f"transformers.BatchEncoding({{{items}}})" if kind == "BatchEncoding" else f"{{{items}}}"
    values = remapped(result["values"], mapping) if ids else result["values"]
    if kind == "tensor":
        dtype = "" if result["dtype"] == "int64" else f", dtype=torch.{result['dtype']}"
        return f"torch.tensor({values!r}{dtype})"
    return repr(values)


TOKENIZER_CLASS = re.compile(r"Tokenizer|Processor")  # AutoTokenizer, PreTrainedTokenizerFast, AutoProcessor
ID_METHODS = {"encode", "encode_plus", "batch_encode_plus", "apply_chat_template"}  # besides calling it


def _loads_tokenizer(value: ast.expr) -> bool:
    """`AutoTokenizer.from_pretrained(...)`, `PreTrainedTokenizerFast.from_pretrained(...)`, ..."""
    func = value.func if isinstance(value, ast.Call) else None
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "from_pretrained"
        and TOKENIZER_CLASS.search(ast.unparse(func.value)) is not None
    )


def unrecorded_tokenizer_calls(source: str, recorded: set[int]) -> list[int]:
    """The lines of the script's calls that give a model ids from a tokenizer it loads (`tok = AutoTokenizer
    .from_pretrained(...)`, then `tok(...)`, `tok.encode(...)`, `tok.apply_chat_template(...)` unless `tokenize=False`;
    a `pipeline(...)`), none of whose lines is in `recorded` (the calls whose results a literal replaces): a twin
    runs them, and their ids are the real vocabulary's. A call the failing run never reached is one."""
    tree = ast.parse(source)
    # by the last part of the name: `tokenizer = ...` is `self.tokenizer` once passed to a class
    loads = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and _loads_tokenizer(n.value)]
    holders = {ast.unparse(target).rsplit(".", 1)[-1] for node in loads for target in node.targets}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or spans(node, recorded):
            continue
        func = node.func
        held = ast.unparse(func.value if isinstance(func, ast.Attribute) and func.attr in ID_METHODS else func)
        held = held.rsplit(".", 1)[-1]
        text_only = any(k.arg == "tokenize" and getattr(k.value, "value", None) is False for k in node.keywords)
        if (held in holders and not text_only) or callee_name(func) == "pipeline":
            lines.append(node.lineno)
    return sorted(lines)


def spans(node: ast.AST, lines: set) -> bool:
    """Whether one of `lines` falls within `node` (a call a traced run recorded at any of the lines it is written
    over)."""
    return any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in lines if line is not None)


def callee_name(func: ast.expr) -> str:
    """`f` of `f(...)` or `x.f(...)` ('' for anything else)."""
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
