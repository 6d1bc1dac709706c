"""Statements: ddmin over the statements of every block and over lines, definitions nothing reads dropped (one at
a time, or all at once), and a variable read once inlined where it is read."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from ..ddmin import ddmin
from ..search import Problem
from ..source import replace_node
from .common import _accept_batches, _module, _names_loaded, _render


def remove_dead_definitions(tree: ast.Module) -> Iterator[ast.Module]:
    """Functions, classes and assignments whose names nothing reads are dropped."""
    loaded = _names_loaded(tree)
    for i, stmt in enumerate(tree.body):
        names = _defined_names(stmt)
        if names and not names & loaded:
            new = copy.deepcopy(tree)
            del new.body[i]
            yield new


def _defined_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if all(isinstance(t, ast.Name) for t in targets) and not _has_call(stmt.value):
            return {t.id for t in targets}
    return set()


def _has_call(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(n, ast.Call) for n in ast.walk(node))


def delete_statements(problem: Problem) -> None:
    """ddmin over the statements of every block, outermost block first."""
    path_count = len(_blocks(ast.parse(problem.current)))
    for index in range(path_count):
        blocks = _blocks(ast.parse(problem.current))
        if index >= len(blocks):
            break
        size = len(blocks[index][0])

        def first_interesting(candidates, index=index):
            sources = [_with_block(problem.current, index, keep) for keep in candidates]
            return problem.first_interesting(sources)

        keep = ddmin(list(range(size)), first_interesting)
        if len(keep) < size:
            problem.accept(_with_block(problem.current, index, keep))


def _blocks(tree: ast.Module) -> list[tuple[list[ast.stmt], ast.AST, str]]:
    """Every statement list in the tree, in walk order (module body first)."""
    out = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append((block, node, field))
    return out


def _with_block(source: str, index: int, keep: list[int]) -> str:
    tree = ast.parse(source)
    block, node, field = _blocks(tree)[index]
    setattr(
        node,
        field,
        [block[i] for i in keep] or ([] if isinstance(node, ast.Module) or field != "body" else [ast.Pass()]),
    )
    return ast.unparse(ast.fix_missing_locations(tree))


def delete_lines(problem: Problem) -> None:
    """Line-level ddmin over the unparsed source; candidates that do not parse are skipped."""
    lines = problem.current.splitlines()

    def first_interesting(candidates):
        sources = ["\n".join(lines[i] for i in keep) + "\n" for keep in candidates]
        return problem.first_interesting(sources)

    keep = ddmin(list(range(len(lines))), first_interesting)
    if len(keep) < len(lines):
        problem.accept("\n".join(lines[i] for i in keep) + "\n")


def inline_single_use_variables(problem: Problem) -> None:
    """`root = mkdtemp()` read once, later, at top level and outside any loop, function or comprehension: the
    expression moves to its one read. Every such variable in one candidate first, then one at a time."""
    names = _single_use_variables(ast.parse(problem.current))
    _accept_batches(problem, [names, *([n] for n in names)], lambda batch: _with_inlined(problem.current, batch))


_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _single_use_variables(tree: ast.Module) -> list[str]:
    """Names bound once, by a top-level `name = expr`, and read exactly once in a later top-level statement, where
    that read runs at most once (not in a loop, a function, a class or a comprehension)."""
    stores = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
    loads = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    found = []
    for index, stmt in enumerate(tree.body):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        name = stmt.targets[0].id
        if stores.count(name) != 1 or loads.count(name) != 1:
            continue
        later = [s for s in tree.body[index + 1 :] if name in _once_reads(s)]
        if later:
            found.append(name)
    return found


def _once_reads(node: ast.AST) -> set[str]:
    """Names this node reads where each read runs at most once per run of the node."""
    if isinstance(node, _SCOPES):
        return set()
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return {node.id}
    return set().union(*(_once_reads(child) for child in ast.iter_child_nodes(node)))


def _with_inlined(source: str, names: list[str]) -> str | None:
    if not names:
        return None
    tree = ast.parse(source)
    for name in names:
        if name not in _single_use_variables(tree):
            return None
        assign = next(
            s
            for s in tree.body
            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name
        )
        tree.body.remove(assign)
        use = next(n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)
        if not replace_node(tree, use, copy.deepcopy(assign.value)):
            return None
    return _render(tree)


def drop_all_dead_definitions(problem: Problem) -> None:
    """Every definition nothing reads, in one candidate, until none is left (one run, not one per definition)."""
    while True:
        tree = ast.parse(problem.current)
        loaded = _names_loaded(tree)
        body = [s for s in tree.body if not (_defined_names(s) and not _defined_names(s) & loaded) and not _no_op(s)]
        if len(body) == len(tree.body):
            return
        candidate = _module(body)
        if problem.first_interesting([candidate]) is None:
            return
        problem.accept(candidate)


def _no_op(stmt: ast.stmt) -> bool:
    """`path = path`: what reductions leave of a rebinding (`path = normalize(path)` with the call unwrapped)."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Name)
        and stmt.value.id == stmt.targets[0].id
    )
