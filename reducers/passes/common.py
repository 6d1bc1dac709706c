"""What the passes share: the two shapes of pass (`Generator`, `Pass`), a copy of the tree with one node rewritten
(`_edits`), the names a tree reads, rendering a proposal, and accepting candidates in batches."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator

from ..search import Problem
from ..source import replace_node

Generator = Callable[[ast.Module], Iterator[ast.Module]]
Pass = Callable[[Problem], None]


def _edits(
    tree: ast.Module, wanted: type | tuple[type, ...], rewrite: Callable[[ast.AST], list]
) -> Iterator[ast.Module]:
    """For each node of type ``wanted`` (in walk order) and each replacement ``rewrite`` offers for it,
    a copy of the tree with that one node replaced (a list of statements splices into its block)."""
    nodes = [n for n in ast.walk(tree) if isinstance(n, wanted)]
    for target, original in enumerate(nodes):
        for choice in range(len(rewrite(original))):
            new = copy.deepcopy(tree)
            node = _nth(new, wanted, target)
            if replace_node(new, node, rewrite(node)[choice]):
                yield new


def _nth(tree: ast.AST, wanted, index: int) -> ast.AST:
    return [n for n in ast.walk(tree) if isinstance(n, wanted)][index]


def _names_loaded(tree: ast.AST) -> set[str]:
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded | {
        n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
    }


def _calls_of(tree: ast.AST, name: str) -> list[ast.Call]:
    """Every call of the plain name `name` (a module-level function) in `tree`."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def _body(stmts: list[ast.stmt]) -> list[ast.stmt]:
    return stmts or [ast.Pass()]


def _reads(stmt: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _module(body: list[ast.stmt]) -> str:
    return ast.unparse(ast.Module(body, [])) + "\n"


def _accept_batches(problem: Problem, batches: list[list[str]], candidate: Callable[[list[str]], str | None]) -> None:
    """Each batch's candidate (made from the current program when its turn comes), accepted when interesting: all
    at once first, then smaller batches. A candidate already tried is not asked again."""
    tried: set[str] = set()
    for batch in batches:
        text = candidate(batch)
        if text is None or text in tried:
            continue
        tried.add(text)
        if problem.first_interesting([text]) is not None:
            problem.accept(text)


def _render(tree: ast.Module) -> str | None:
    """Source for a proposed tree; a proposal that cannot be rendered is dropped, not fatal."""
    try:
        return ast.unparse(ast.fix_missing_locations(tree))
    except Exception:
        return None
