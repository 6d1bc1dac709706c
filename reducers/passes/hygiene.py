"""What a maintainer runs as is: no unused or repeated imports, no dead stores, no settings of the original run's
environment, no paths of this machine, no roundabout idioms a reduction left."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator

from ..search import Problem
from ..source import header_end, replace_node
from .common import _accept_batches, _edits, _names_loaded, _nth, _reads, _render
from .statements import _has_call


def _idiom(node: ast.Call) -> ast.expr | None:
    """What a reduction leaves that a person would not write, as the plainer expression: `os.path.join(x)` is `x`,
    `next(iter(enumerate(xs)))` is `(0, xs[0])`, `next(iter(xs))` is `xs[0]`, `t.to(device)` is `t` (where the move
    changes nothing the failure needs: the oracle says)."""
    func = node.func
    if ast.unparse(func) == "os.path.join" and len(node.args) == 1 and not node.keywords:
        return node.args[0]
    if (
        isinstance(func, ast.Name)
        and func.id == "next"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Call)
        and ast.unparse(node.args[0].func) == "iter"
        and len(node.args[0].args) == 1
    ):
        inner = node.args[0].args[0]
        if isinstance(inner, ast.Call) and ast.unparse(inner.func) == "enumerate" and len(inner.args) == 1:
            return ast.Tuple([ast.Constant(0), ast.Subscript(inner.args[0], ast.Constant(0), ast.Load())], ast.Load())
        return ast.Subscript(inner, ast.Constant(0), ast.Load())
    if isinstance(func, ast.Attribute) and func.attr == "to" and len(node.args) + len(node.keywords) == 1:
        return func.value
    return None


def simplify_idioms(tree: ast.Module) -> Iterator[ast.Module]:
    """A call a reduction left in a roundabout form becomes the plain expression (`_idiom`), one at a time."""

    def plainer(node: ast.AST) -> list:
        found = _idiom(node)
        return [found] if found is not None else []

    yield from _edits(tree, ast.Call, plainer)


def drop_unused_imports(problem: Problem) -> None:
    """Every imported name nothing reads goes: all in one candidate, then one name at a time. Judged all the same:
    an import can act (`import bitsandbytes` registers its backends), and the oracle says whether this one did."""
    names = sorted(_unused_imports(ast.parse(problem.current)))
    _accept_batches(
        problem, [names, *([n] for n in names)], lambda batch: _without_imports(problem.current, set(batch))
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements anywhere in the tree, `from __future__` left out (they bind nothing a program reads)."""
    return (
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.module != "__future__")
    )


def _bound_name(alias: ast.alias) -> str:
    return alias.asname or alias.name.split(".")[0]


def _unused_imports(tree: ast.Module) -> set[str]:
    loaded = _names_loaded(tree) | _exported(tree)
    return {_bound_name(a) for stmt in _imports(tree) for a in stmt.names if a.name != "*"} - loaded


def _exported(tree: ast.Module) -> set[str]:
    """The names `__all__ = [...]` lists: a module's exports are read by whoever imports it."""
    return {
        e.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, (ast.List, ast.Tuple))
        for e in node.value.elts
        if isinstance(e, ast.Constant) and isinstance(e.value, str)
    }


def _without_imports(source: str, names: set[str]) -> str | None:
    """The program without the imports that bind `names` (an emptied import goes; an emptied block gets `pass`)."""
    tree = ast.parse(source)
    changed = False
    for stmt in list(_imports(tree)):
        kept = [a for a in stmt.names if a.name == "*" or _bound_name(a) not in names]
        if len(kept) < len(stmt.names):
            changed = True
            if kept:
                stmt.names = kept
            else:
                replace_node(tree, stmt, [])
    return _render(tree) if changed else None


def drop_environment_settings(tree: ast.Module) -> Iterator[ast.Module]:
    """A module-level `os.environ[NAME] = value` (what a prepared script sets from the original run's environment)
    goes. A container image sets many (CUDA_VERSION, NCCL_*, TORCH_CUDA_ARCH_LIST): as `greedy(chain=True)`, all of
    them go in one candidate first, the ones the failure needs stay."""
    for i, stmt in enumerate(tree.body):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Subscript)
            and ast.unparse(stmt.targets[0].value) == "os.environ"
        ):
            new = copy.deepcopy(tree)
            del new.body[i]
            yield new


def drop_duplicate_imports(problem: Problem) -> None:
    """An import that repeats an earlier module-level one (the twin's `import tempfile` beside the script's own, an
    import inside a function of what the module imported already) goes: one candidate, judged like any other."""
    tree = ast.parse(problem.current)
    seen: set[tuple] = set()
    changed = False
    for stmt in list(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            changed |= _drop_repeated(tree, stmt, seen, remember=True)
        else:
            for node in list(_imports(stmt)):
                changed |= _drop_repeated(tree, node, seen, remember=False)
    candidate = _render(tree) if changed else None
    if candidate is not None and problem.first_interesting([candidate]) is not None:
        problem.accept(candidate)


def _drop_repeated(tree: ast.Module, stmt: ast.Import | ast.ImportFrom, seen: set[tuple], remember: bool) -> bool:
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return False
    kept = []
    for alias in stmt.names:
        key = _import_key(stmt, alias)
        if key in seen and alias.name != "*":
            continue
        kept.append(alias)
        if remember:
            seen.add(key)
    if len(kept) == len(stmt.names):
        return False
    if kept:
        stmt.names = kept
    else:
        replace_node(tree, stmt, [])
    return True


def _import_key(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple:
    if isinstance(stmt, ast.Import):
        return ("import", alias.name, alias.asname)
    return ("from", stmt.module, stmt.level, alias.name, alias.asname)


def drop_dead_assignments(problem: Problem) -> None:
    """Stores nothing reads: an assignment to a name no statement reads (`CKPT_ROOT = '/data/ckpt'` left by the
    slice, `log = logging.getLogger(...)`), and one overwritten before any read. All in one candidate; else each
    value that calls something (which may act: the failing call's result is often unread) kept as a statement and
    the others dropped, in one candidate; then one name at a time."""
    while True:  # a store dropped can leave the one before it overwritten unread
        before = problem.current
        names = list(dict.fromkeys(name for name, _ in _dead_stores(ast.parse(before))))
        batches = [[f"drop:{n}" for n in names], [f"call:{n}" for n in names], *([f"drop:{n}"] for n in names)]
        _accept_batches(problem, batches, lambda batch: _without_stores(problem.current, batch))
        if problem.current == before:
            return


def _dead_stores(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    """(name, statement) for each plain assignment (`a = ...`, `a = b = ...`, `a, b = ...`, `a: T = ...`) outside
    class bodies whose names nothing reads, or, at module level, that no later statement reads before a plain
    assignment overwrites it or the program ends (nor any function, which may run in between)."""
    loaded = (
        _names_loaded(tree)
        | _exported(tree)
        | _augmented(tree)
        | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)}
    )
    in_classes = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in ast.walk(c)}
    dead = []
    for node in ast.walk(tree):
        names = _store_names(node)
        if names and id(node) not in in_classes and not names & loaded and not names & {"__all__", "_"}:
            dead += [(name, node) for name in sorted(names)]
    deferred = {
        n.id
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for n in ast.walk(f)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    for index, stmt in enumerate(tree.body):
        names = _store_names(stmt)
        if len(names) != 1 or names & deferred:
            continue
        (name,) = names
        for later in tree.body[index + 1 :]:
            if name in _reads(later):
                break
            if _store_names(later) == names:
                dead.append((name, stmt))
                break
        else:  # read by no statement after it: `model = dispatch_model(model, ...)`, the last line
            dead.append((name, stmt))
    return list({(name, id(stmt)): (name, stmt) for name, stmt in dead}.values())


def _store_names(stmt: ast.AST) -> set[str]:
    """The names a plain assignment binds (every target a name, or a tuple of names); empty for anything else."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets = [stmt.target]
    else:
        return set()
    flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    return {t.id for t in flat} if all(isinstance(t, ast.Name) for t in flat) else set()


def _augmented(tree: ast.AST) -> set[str]:
    """Names an augmented assignment (`n += 1`) updates: it reads them."""
    return {n.target.id for n in ast.walk(tree) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}


def _without_stores(source: str, batch: list[str]) -> str | None:
    """`drop:NAME` removes NAME's dead stores; `call:NAME` keeps their value as a statement where it calls something."""
    tree = ast.parse(source)
    wanted = dict(reversed(key.split(":", 1)) for key in batch)
    changed = False
    for name, stmt in _dead_stores(tree):
        how = wanted.get(name)
        if how == "drop":
            changed |= replace_node(tree, stmt, [])
        elif how == "call":
            changed |= replace_node(tree, stmt, ast.Expr(stmt.value) if _has_call(stmt.value) else [])
    return _render(tree) if changed else None


# A path of the machine the reduction ran on: a directory a run made (the reducer's `/tmp/minrepro-fork-...`, any temp
# dir) or a user's own (`/home/...`, `/data/ckpt`): absolute, with a directory in it. Relative paths are the script's.
_MACHINE_PATH = re.compile(r"^(?:/(?!dev/|proc/|sys/)[^/\s]+/|~/|[A-Za-z]:[\\/])")


def is_machine_path(value: object) -> bool:
    return isinstance(value, str) and "\n" not in value and bool(_MACHINE_PATH.match(value))


def machine_paths(tree: ast.Module) -> Iterator[ast.Module]:
    """A string literal naming a path of this machine becomes `tempfile.mkdtemp()`: a fresh directory, which is what an
    offload or output directory needs (one the script reads from is not: the oracle says). Without `import tempfile`
    the import comes too, one line more, which the search refuses: such a literal should never get in
    (`resolve_recorded_values` leaves them out); this pass catches what does."""
    in_fstrings = {id(v) for j in ast.walk(tree) if isinstance(j, ast.JoinedStr) for v in j.values}
    targets = [
        i
        for i, n in enumerate(n for n in ast.walk(tree) if isinstance(n, ast.Constant))
        if id(n) not in in_fstrings and is_machine_path(n.value)
    ]
    has_tempfile = "tempfile" in {_bound_name(a) for s in _imports(tree) for a in s.names}
    for index in targets:
        new = copy.deepcopy(tree)
        fresh = ast.Call(ast.Attribute(ast.Name("tempfile", ast.Load()), "mkdtemp", ast.Load()), [], [])
        if replace_node(new, _nth(new, ast.Constant, index), fresh):
            if not has_tempfile:
                new.body.insert(header_end(new.body), ast.Import([ast.alias("tempfile")]))
            yield new


def merge_module_imports(tree: ast.Module) -> Iterator[ast.Module]:
    """`import transformers` beside `from transformers import AutoModelForCausalLM` (the twin's prelude beside the
    script's own imports): each `transformers.Name` read becomes `Name`, added to the from-import, and the plain
    import goes: one line less. Only where every use of the module is such a read and no other binding has the name."""
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))} | {
        a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names
    }
    for k, stmt in enumerate(tree.body):
        if not isinstance(stmt, ast.Import) or len(stmt.names) != 1 or stmt.names[0].asname:
            continue
        module = stmt.names[0].name
        into = next(
            (
                i
                for i, s in enumerate(tree.body)
                if isinstance(s, ast.ImportFrom) and s.module == module and s.level == 0 and s.names[0].name != "*"
            ),
            None,
        )
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == module]
        reads = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == module
        ]
        if into is None or "." in module or not reads or len(reads) != len(uses):
            continue
        if any(not isinstance(n.ctx, ast.Load) for n in reads):
            continue
        first_read = min(i for i, s in enumerate(tree.body) if any(n in reads for n in ast.walk(s)))
        if first_read < into:
            continue  # read before the from-import binds it
        taken = {a.asname or a.name for a in tree.body[into].names}
        wanted = {n.attr for n in reads}
        if any(attr in bound - taken for attr in wanted):
            continue  # a name the program binds otherwise: `Name` would read that instead
        new = copy.deepcopy(tree)
        for node in [
            n
            for n in ast.walk(new)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == module
        ]:
            replace_node(new, node, ast.Name(node.attr, ast.Load()))
        new.body[into].names += [ast.alias(attr) for attr in sorted(wanted - taken)]
        del new.body[k]
        yield new
