"""Functions: a module-level function called once inlined where it is called (as a statement, or inside one), and
the parameters a function never reads dropped with their arguments. The binding of a call's arguments to a
function's parameters (`_bind`, `_arguments`) serves the methods' inlining too (`classes`)."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from ..search import Problem
from ..source import replace_node
from .common import _calls_of, _names_loaded, _render


def inline_functions(tree: ast.Module) -> Iterator[ast.Module]:
    """A module-level function called once, as a statement or `x = f(...)`, is replaced by its body."""
    for func in _inlinable(tree):
        new = _inline(copy.deepcopy(tree), func.name)
        if new is not None:
            yield new


def inline_nested_calls(tree: ast.Module) -> Iterator[ast.Module]:
    """A module-level function called once inside a statement (`dispatch_model(m, device_map=plan(s))`) is
    inlined before that statement, the call becoming the name it returned. Late in the list: early, on a long
    script, each such proposal costs a run that the slice would have made unnecessary."""
    for func in _inlinable(tree):
        new = _inline_nested(copy.deepcopy(tree), func.name)
        if new is not None:
            yield new


def _inlinable(tree: ast.Module) -> list[ast.FunctionDef]:
    """Module-level functions called exactly once, without decorators, early returns or yields."""
    return [
        f
        for f in tree.body
        if isinstance(f, ast.FunctionDef)
        and not f.decorator_list
        and len(_calls_of(tree, f.name)) == 1
        and not _returns_early(f)
        and not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(f))
    ]


def _returns_early(func: ast.FunctionDef) -> bool:
    returns = [n for n in ast.walk(func) if isinstance(n, ast.Return)]
    return len(returns) > 1 or (bool(returns) and func.body[-1] is not returns[0])


def _inline(tree: ast.Module, name: str) -> ast.Module | None:
    func = next(s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name)
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name:
                    func_copy = copy.deepcopy(func)
                    binds = _bind(func_copy, call)
                    if binds is None:
                        return None
                    body = _without_docstring(func_copy.body)  # inlined, a docstring is a stray string
                    if body and isinstance(body[-1], ast.Return):
                        ret = body.pop()
                        if isinstance(stmt, ast.Assign) and ret.value is not None:
                            body.append(ast.Assign(stmt.targets, ret.value))
                        elif ret.value is not None:
                            body.append(ast.Expr(ret.value))  # the value may be the failing call
                    block[i : i + 1] = binds + body
                    tree.body.remove(func)
                    return tree
    return None


# a call under these is evaluated conditionally, repeatedly or in another scope: its body cannot move before
_NOT_HOISTABLE = (
    ast.Lambda,
    ast.comprehension,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.BoolOp,
    ast.IfExp,
    ast.While,
    ast.FunctionDef,
    ast.ClassDef,
)


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    docstring = (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    return body[1:] if docstring else body


def _inline_nested(tree: ast.Module, name: str) -> ast.Module | None:
    func = next(s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name)
    body = _without_docstring(func.body)
    ret = body[-1] if body and isinstance(body[-1], ast.Return) else None
    if ret is None or not isinstance(ret.value, ast.Name):  # the call becomes the returned name
        return None
    for block, index in _statement_slots(tree):
        stmt = block[index]
        if stmt is func or isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            continue
        call = _hoistable_call(stmt, name)
        if call is None:
            continue
        binds = _bind(func, call)
        if binds is None:
            return None
        replace_node(stmt, call, ast.Name(ret.value.id, ast.Load()))
        block[index:index] = binds + body[:-1]
        tree.body.remove(func)
        return tree
    return None


def _statement_slots(tree: ast.Module) -> list[tuple[list[ast.stmt], int]]:
    return [
        (block, i)
        for parent in ast.walk(tree)
        for field in ("body", "orelse", "finalbody")
        if isinstance(block := getattr(parent, field, None), list)
        for i in range(len(block))
    ]


def _hoistable_call(stmt: ast.stmt, name: str) -> ast.Call | None:
    """The call of `name` in this statement's own expressions, unless something evaluates it conditionally."""

    def search(node: ast.AST) -> ast.Call | None:
        if isinstance(node, _NOT_HOISTABLE):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            return node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue  # nested statements are slots of their own
            found = search(child)
            if found is not None:
                return found
        return None

    return search(stmt)


def _bind(func: ast.FunctionDef, call: ast.Call) -> list[ast.stmt] | None:
    """Bind the call's arguments to the parameters (simple signatures only): a simple argument (a name,
    constant or attribute chain) is substituted into the body; any other gets an assignment."""
    bound = _arguments(func, call)
    if bound is None:
        return None
    simple = {p: v for p, v in bound.items() if _is_simple(v) and not _assigned(func, p)}
    _Substitute(simple).visit(func)
    return [ast.Assign([ast.Name(p, ast.Store())], v) for p, v in bound.items() if p not in simple]


def _arguments(func: ast.FunctionDef, call: ast.Call, skip: int = 0) -> dict[str, ast.expr] | None:
    """Each parameter's value in `call`, given or its default (simple signatures only, else None); `skip`: the
    leading parameters the call does not pass (a constructor's `self`)."""
    args = func.args
    if (
        args.vararg
        or args.kwarg
        or args.posonlyargs
        or args.kwonlyargs
        or any(isinstance(a, ast.Starred) for a in call.args)
    ):
        return None
    params = [a.arg for a in args.args][skip:]
    defaults = dict(zip([a.arg for a in args.args][len(args.args) - len(args.defaults) :], args.defaults, strict=False))
    values = dict(zip(params, call.args, strict=False))
    for kw in call.keywords:
        if kw.arg not in params:
            return None
        values[kw.arg] = kw.value
    if any(p not in values and p not in defaults for p in params):
        return None
    return {p: values.get(p, defaults.get(p)) for p in params}


def _is_simple(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, (ast.Name, ast.Constant))


def _assigned(func: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(func))


class _Substitute(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.AST]):
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node


def drop_unused_parameters(problem: Problem) -> None:
    """Parameters a function (or a class's `__init__`) never reads go, with the arguments every call passes for them:
    all at once first (one run), then one at a time. `settings` passed to functions that ignore it keeps a whole class
    alive."""
    while True:
        tree = ast.parse(problem.current)
        unused = [(f, p) for f in _plain_functions(tree) for p in _unused_parameters(f, tree)]
        if not unused:
            return
        every = _without_parameters(tree, unused)
        if every is not None and problem.first_interesting([every]) is not None:
            problem.accept(every)
            continue
        singles = [c for c in (_without_parameters(tree, [u]) for u in unused) if c is not None]
        found = problem.first_interesting(singles)
        if found is None:
            return
        problem.accept(singles[found])


def _plain_functions(tree: ast.Module) -> list[str]:
    """Module-level functions, and classes by their `__init__`, with plain parameters, used only by calls that pass
    nothing unpacked."""
    plain = []
    for node in tree.body:
        func = _callee(tree, node.name) if isinstance(node, ast.FunctionDef | ast.ClassDef) else None
        if func is None or func.decorator_list or func.args.vararg or func.args.kwarg:
            continue
        uses = [
            n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == node.name and isinstance(n.ctx, ast.Load)
        ]
        calls = _calls_of(tree, node.name)
        if (
            len(uses) == len(calls)
            and not any(isinstance(a, ast.Starred) for c in calls for a in c.args)
            and not any(k.arg is None for c in calls for k in c.keywords)
        ):
            plain.append(node.name)
    return plain


def _callee(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """What a call of `name` runs: the module-level function, or the module-level class's own `__init__` (None: a
    class without one, or a decorated class)."""
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name)
    if isinstance(node, ast.FunctionDef):
        return node
    if node.decorator_list:
        return None
    return next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)


def _passed(func: ast.FunctionDef, name: str, tree: ast.Module) -> list[str]:
    """The parameters a call fills, in order: a class's `__init__` without its `self`."""
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    is_class = any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body)
    return names[1:] if is_class else names


def _unused_parameters(name: str, tree: ast.Module) -> list[str]:
    func = _callee(tree, name)
    read = {n.id for stmt in func.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    if "locals" in read or "vars" in read:
        return []
    passed = [*_passed(func, name, tree), *(a.arg for a in func.args.kwonlyargs)]
    return [arg for arg in passed if arg not in read]


def _without_parameters(tree: ast.Module, drops: list[tuple[str, str]]) -> str | None:
    new = copy.deepcopy(tree)
    for name, param in drops:
        func = _callee(new, name)
        positional = _passed(func, name, new)
        for call in _calls_of(new, name):
            if param in positional and positional.index(param) < len(call.args):
                del call.args[positional.index(param)]
            call.keywords = [k for k in call.keywords if k.arg != param]
        _drop_parameter(func.args, param)
    # what was passed only for them goes too (`settings = ServerSettings()`), and then its class is dead
    orphaned = _names_loaded(tree) - _names_loaded(new)
    new.body = [
        s
        for s in new.body
        if not (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id in orphaned
        )
    ]
    return _render(new)


def _drop_parameter(args: ast.arguments, param: str) -> None:
    positional = [*args.posonlyargs, *args.args]
    if param in [a.arg for a in positional]:
        index = [a.arg for a in positional].index(param)
        first_default = len(positional) - len(args.defaults)
        if index >= first_default:
            del args.defaults[index - first_default]
        for group in (args.posonlyargs, args.args):
            group[:] = [a for a in group if a.arg != param]
        return
    index = [a.arg for a in args.kwonlyargs].index(param)
    del args.kwonlyargs[index], args.kw_defaults[index]
