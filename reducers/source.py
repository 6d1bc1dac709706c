"""Facts about a program's text that the search and the harness both need: its canonical form, how many
code lines it has, what it imports, and what it patches that would outlive a run. Standard library only; nothing
here runs code."""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from collections.abc import Sequence
from pathlib import Path


def normalize(source: str) -> str:
    """The canonical text of a program (what every candidate is compared and rendered as)."""
    return ast.unparse(ast.parse(source)) + "\n"


def code_lines(source: str) -> int:
    """Lines holding code: blank lines, comments, the module docstring and the PEP 723 block excluded."""
    skip: set[int] = set()
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(getattr(first, "value", None), ast.Constant)
        and isinstance(first.value.value, str)
    ):
        skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = set()
    for tok in _code_tokens(source):
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - skip)


_IGNORABLE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def _code_tokens(source: str) -> list[tokenize.TokenInfo]:
    return [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in _IGNORABLE]


def code_tokens(source: str) -> int:
    """Tokens of code (comments and layout excluded): a size that a long line cannot hide, as a line count can."""
    return len(_code_tokens(source))


def module_imports(source: str) -> list[str]:
    """Every module the script imports, dotted, in order of first appearance."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


def imported_modules(source: str) -> set[str]:
    """Top-level names of every module the script imports."""
    return {name.split(".")[0] for name in module_imports(source)}


# assigned on an imported name, and put back (or compared, a change retiring the worker) by a reused worker after each
# run (`minrepro.harness._forkserver`: `_Fresh`, `_switches`)
_PUT_BACK = (
    "os.environ",
    "sys.argv",
    "sys.path",
    "sys.stdout",
    "sys.stderr",
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cudnn.enabled",
    "torch.backends.cudnn.benchmark",
    "torch.backends.cudnn.deterministic",
    "torch.backends.cudnn.allow_tf32",
)


def _dotted(node: ast.expr) -> tuple[str | None, str]:
    """The root name of an attribute or subscript chain and the chain as text (`torch.nn.Linear.forward`); the root
    "type()" where the chain starts at `type(x)`, and `__class__` stays in the text."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
        return "type()", ".".join(["type()", *reversed(parts)])
    if not isinstance(node, ast.Name):
        return None, ""
    return node.id, ".".join([node.id, *reversed(parts)])


def _unpacked(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _unpacked(element)]
    return _unpacked(target.value) if isinstance(target, ast.Starred) else [target]


def _targets(node: ast.AST) -> list[ast.expr]:
    """What a statement assigns or deletes (setattr/delattr: their object, as an attribute of it)."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return [t for target in node.targets for t in _unpacked(target)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
        return [ast.Attribute(node.args[0], "?", ast.Store())] if node.args else []
    return []


def patches_imports(source: str, home: Path | None = None, _seen: set[Path] | None = None) -> str:
    """The first statement that patches what outlives a run, as text; "" where there is none. A worker that ran it
    would hand the patch to the next candidate run in it, which a fresh interpreter never sees: such a script's
    candidates each get a worker of their own. A patch is an assignment, `del`, setattr or delattr on an attribute or
    an item of an imported module or of a name bound to one (`mll = transformers.models.llama.modeling_llama`), or of
    a class reached through an instance (`type(model).forward = f`, `model.__class__.forward = f`); the import of
    `unittest.mock` or `mock` (a patcher started and not stopped); and the same in the modules the script imports from
    `home`, its own directory. What a reused worker puts back or compares (`_PUT_BACK`) is not a patch."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "the script does not parse"
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    modules = set(module_imports(source))
    if modules & {"mock", "unittest.mock"} or any(
        isinstance(node, ast.ImportFrom) and node.module == "unittest" and any(a.name == "mock" for a in node.names)
        for node in ast.walk(tree)
    ):
        return "imports mock"
    for node in ast.walk(tree):  # names bound to a chain of attributes of an imported module: aliases of it
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            root, _ = _dotted(node.value)
            if root in imported:
                imported |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        for target in _targets(node):
            if not isinstance(target, (ast.Attribute, ast.Subscript)):
                continue
            root, chain = _dotted(target)
            through_class = root == "type()" or ".__class__." in chain + "."
            if (root in imported or through_class) and not any(
                chain == k or chain.startswith(k + ".") for k in _PUT_BACK
            ):
                return ast.unparse(node).splitlines()[0]
    if home is not None:  # the script's own modules: imported afresh by every run, their patches outlive it too
        seen = _seen if _seen is not None else set()
        for name in sorted(modules):
            for path in (home / f"{name.replace('.', '/')}.py", home / name.replace(".", "/") / "__init__.py"):
                if path.is_file() and path not in seen:
                    seen.add(path)
                    found = patches_imports(path.read_text(encoding="utf-8", errors="replace"), home, seen)
                    if found:
                        return f"{found} (in {path.name})"
    return ""


def replace_node(tree: ast.AST, old: ast.AST, new: ast.AST | list[ast.stmt]) -> bool:
    """Put `new` (a node, or statements: none deletes `old`) where `old` is in `tree`; False where it is not there. A
    block left empty gets `pass`."""
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if isinstance(value, list) and any(v is old for v in value):
                i = next(i for i, v in enumerate(value) if v is old)
                value[i : i + 1] = new if isinstance(new, list) else [new]
                if not value and name == "body" and not isinstance(parent, ast.Module):
                    value.append(ast.Pass())
                return True
            if value is old and not isinstance(new, list):
                setattr(parent, name, new)
                return True
    return False


def header_end(body: list[ast.stmt]) -> int:
    """Where a statement may go first: after the module docstring and the `from __future__` imports."""
    index = 0
    docstring = (
        bool(body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    while index < len(body) and (
        (index == 0 and docstring) or (isinstance(body[index], ast.ImportFrom) and body[index].module == "__future__")
    ):
        index += 1
    return index


# a string literal is one token: a deletion aligned across a quote (`a': 1, '`) merges into nonsense
_TOKEN = re.compile(r"""'''.*?'''|\"\"\".*?\"\"\"|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|\w+|\s+|[^\w\s]""", re.S)


def merge_edits(base: str, edited: Sequence[str]) -> tuple[str, int]:
    """The edits that each of `edited` makes to `base`, made together where they do not collide, and how many were
    taken (in order; one that collides with those taken is left out). Deletions that overlap merge as their union:
    `f(a, b, c)` less `b` (`"b, "` out) and less `c` (`", c"` out) is `f(a, )`. The text may not parse; the caller
    checks, as it judges the result anyway."""
    tokens = _TOKEN.findall(base)
    deleted: set[int] = set()
    rewrites: list[tuple[int, int, list[str]]] = []  # (start, end, new tokens): replacements and insertions
    taken = 0
    for text in edited:
        opcodes = difflib.SequenceMatcher(None, tokens, _TOKEN.findall(text), autojunk=False).get_opcodes()
        new_tokens = _TOKEN.findall(text)
        ops = [_slid(tokens, i1, i2, new_tokens[j1:j2]) for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
        if not ops or any(_collide(op, other) for op in ops for other in rewrites):
            continue
        if any(new and any(op[0] <= i <= op[1] for i in deleted) for op in ops for new in [op[2]]):
            continue  # a rewrite next to or inside what is deleted
        rewrites += [op for op in ops if op[2]]
        deleted.update(i for i1, i2, new in ops if not new for i in range(i1, i2))
        taken += 1
    starts = {i1: new for i1, _, new in rewrites}
    replaced = {i for i1, i2, _ in rewrites for i in range(i1, i2)}
    out: list[str] = []
    for i in range(len(tokens) + 1):
        out += starts.get(i, [])
        if i < len(tokens) and i not in replaced and i not in deleted:
            out.append(tokens[i])
    return "".join(out), taken


def _slid(tokens: list[str], i1: int, i2: int, new: list[str]) -> tuple[int, int, list[str]]:
    """A deletion as far right as it can slide and delete the same text: `f(a, b, c)` less `b` is `b, ` out, never
    `, b`, so that its union with `a, ` out is `f(c)` and not `f(, c)`."""
    while not new and i1 < i2 < len(tokens) and tokens[i1] == tokens[i2]:
        i1, i2 = i1 + 1, i2 + 1
    return i1, i2, new


def _collide(op: tuple[int, int, list[str]], other: tuple[int, int, list[str]]) -> bool:
    """Whether an edit's change meets a rewrite's (ranges that overlap or touch: which goes first is unknown)."""
    return not (op[1] < other[0] or other[1] < op[0])
