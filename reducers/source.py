"""Facts about a program's text that the search and the harness both need: its canonical form, how many
code lines it has, and what it imports. Standard library only; nothing here runs code."""

from __future__ import annotations

import ast
import io
import tokenize


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
    docstring = bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    while index < len(body) and (
        (index == 0 and docstring) or (isinstance(body[index], ast.ImportFrom) and body[index].module == "__future__")
    ):
        index += 1
    return index
