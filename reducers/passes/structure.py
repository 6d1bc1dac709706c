"""Structure: the blocks and wrappers around the failing code unwrapped (a `__main__` guard, `try`, `with`, `if`,
a conditional expression, a call or a `raise` around the failing call, a decorator), loops and comprehensions run
once, and arithmetic and branches on literals folded."""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Iterator

from .common import _edits


def unwrap_main_guard(tree: ast.Module) -> Iterator[ast.Module]:
    """`if __name__ == "__main__": body` at module level becomes `body`; there `sys.exit(main())` and
    `raise SystemExit(main())` become `main()` (the exit status is not what a repro keeps, and a bare call is
    what `inline_functions` can inline)."""
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test):
            new = copy.deepcopy(tree)
            new.body[i : i + 1] = [_without_exit(s) for s in new.body[i].body]
            yield new


def _without_exit(stmt: ast.stmt) -> ast.stmt:
    call = stmt.value if isinstance(stmt, ast.Expr) else stmt.exc if isinstance(stmt, ast.Raise) else None
    exits = (
        isinstance(call, ast.Call)
        and len(call.args) == 1
        and not call.keywords
        and ast.unparse(call.func) in ("sys.exit", "exit", "quit", "SystemExit")
    )
    return ast.Expr(call.args[0]) if exits else stmt


def drop_decorators(tree: ast.Module) -> Iterator[ast.Module]:
    """A decorated function loses one decorator (`@retry()`, `@torch.no_grad()`): a plain function can be inlined."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.decorator_list]
    for index, func in enumerate(funcs):
        for position in range(len(func.decorator_list)):
            new = copy.deepcopy(tree)
            target = [
                n for n in ast.walk(new) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.decorator_list
            ][index]
            del target.decorator_list[position]
            yield new


def unwrap_try(tree: ast.Module) -> Iterator[ast.Module]:
    """`try: body ... finally: f` becomes `body` (then `body; f`)."""
    yield from _edits(tree, ast.Try, lambda n: [n.body, n.body + n.finalbody] if n.finalbody else [n.body])


def unwrap_with(tree: ast.Module) -> Iterator[ast.Module]:
    """`with ctx: body` becomes `body` (no_grad, autocast and logging contexts rarely matter); `with ctx as name:`
    keeps its name: `name = ctx` (a file, a module), `tempfile.TemporaryDirectory()` becoming `mkdtemp()`. A job
    inside one `with` block is one top-level statement, which neither the slice nor a prefix snapshot can cut."""
    yield from _edits(tree, ast.With, lambda n: [_bound(n.items) + n.body])


def _bound(items: list[ast.withitem]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for item in items:
        if isinstance(item.optional_vars, ast.Name):
            value = copy.deepcopy(item.context_expr)
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "TemporaryDirectory"
            ):
                value.func.attr = "mkdtemp"  # the same directory, as a str (the repro leaves it behind)
            out.append(ast.Assign([ast.Name(item.optional_vars.id, ast.Store())], value))
    return out


def unwrap_if(tree: ast.Module) -> Iterator[ast.Module]:
    """`if c: a else: b` becomes `a`, or `b`: the branch taken is what a repro needs."""
    yield from _edits(tree, ast.If, lambda n: [n.body] + ([n.orelse] if n.orelse else []))


def unwrap_conditional_expressions(tree: ast.Module) -> Iterator[ast.Module]:
    """`a if c else b` becomes `a`, or `b` (a rendered scenario's `cache if cache else tempfile.mkdtemp()`)."""
    yield from _edits(tree, ast.IfExp, lambda n: [n.body, n.orelse])


def unroll_loops(tree: ast.Module) -> Iterator[ast.Module]:
    """`for x in xs: body` becomes `x = next(iter(xs)); body`; `while c: body` becomes `if c: body`."""

    def one_iteration(node: ast.AST) -> list:
        if isinstance(node, ast.For):
            first = ast.parse(f"{ast.unparse(node.target)} = {_first_item(node.iter)}").body
            return [first + [s for s in node.body if not isinstance(s, (ast.Break, ast.Continue))]]
        return [ast.If(node.test, node.body, [])]

    yield from _edits(tree, (ast.For, ast.While), one_iteration)


def unroll_comprehensions(tree: ast.Module) -> Iterator[ast.Module]:
    """`out = [f(x) for x in xs]` at a statement's top becomes `x = next(iter(xs))` then `out = [f(x)]`, or
    `out = f(x)` where nothing reads `out`: a serving script's `[server.answer(r) for r in requests]` leaves a call
    that a method's inlining can take (a call inside a comprehension is in a scope of its own)."""
    for index, stmt in enumerate(tree.body):
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
        if not isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) or len(value.generators) != 1:
            continue
        loop = value.generators[0]
        if loop.ifs or loop.is_async or not isinstance(loop.target, (ast.Name, ast.Tuple)):
            continue
        read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        unread = targets and all(isinstance(t, ast.Name) and t.id not in read for t in targets)
        single = value.elt if unread or isinstance(stmt, ast.Expr) else ast.List([value.elt], ast.Load())
        new = copy.deepcopy(tree)
        first = ast.parse(f"{ast.unparse(loop.target)} = {_first_item(loop.iter)}").body
        rest = ast.Assign(targets, single) if targets else ast.Expr(single)
        new.body[index : index + 1] = [*first, copy.deepcopy(rest)]
        yield new


def _first_item(iterable: ast.expr) -> str:
    """The source of an iterable's first item: `0` for `range(3)`, `2` for `range(2, 5)`, else `next(iter(...))`."""
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "range"
        and 1 <= len(iterable.args) <= 2
        and not iterable.keywords
        and all(isinstance(a, ast.Constant) and type(a.value) is int for a in iterable.args)
    ):
        bounds = [0, *[a.value for a in iterable.args]][-2:]
        if bounds[0] < bounds[1]:
            return str(bounds[0])
    return f"next(iter({ast.unparse(iterable)}))"


def unwrap_calls(tree: ast.Module) -> Iterator[ast.Module]:
    """A call statement is replaced by one of its arguments: `sys.exit(main())` becomes `main()`."""

    def arguments(stmt: ast.AST) -> list:
        call = stmt.value
        if not isinstance(call, ast.Call):
            return []
        return [ast.Expr(a) for a in call.args if not isinstance(a, ast.Starred)]

    yield from _edits(tree, ast.Expr, arguments)


def unwrap_raise(tree: ast.Module) -> Iterator[ast.Module]:
    """`raise SystemExit(main())` becomes `main()`: the call that fails, without the exit around it."""

    def call_inside(node: ast.AST) -> list:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args and isinstance(exc.args[0], ast.Call):
            return [ast.Expr(exc.args[0])]
        return []

    yield from _edits(tree, ast.Raise, call_inside)


def fold_constants(tree: ast.Module) -> Iterator[ast.Module]:
    """Arithmetic on literals is computed once (`range(1 - 0)` becomes `range(1)`), and an `if` or `a if c else b`
    on a literal becomes the branch it takes: what `resolve_recorded_values` leaves of `if args.dry_run:`. The
    `return` in that dead branch would keep `main()` from being inlined, and the slice from seeing inside it.
    Statements after a `return` or `raise` in their block go too."""
    folded = _drop_unreachable(_Fold().visit(copy.deepcopy(tree)))
    if ast.dump(folded) != ast.dump(tree):
        for node in ast.walk(folded):  # a block left empty by a dead branch still needs a statement
            if not isinstance(node, ast.Module) and getattr(node, "body", None) == []:
                node.body = [ast.Pass()]
        yield folded


_TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _drop_unreachable(tree: ast.Module) -> ast.Module:
    """What follows a `return`/`raise` in its block never runs: an `if ...: return 1` that `unwrap_if` made
    unconditional left a function ending in dead code, with an early return that kept it from being inlined."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                end = next((i for i, stmt in enumerate(block) if isinstance(stmt, _TERMINAL)), None)
                if end is not None:
                    del block[end + 1 :]
    return tree


_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Div: operator.truediv,
}


class _Fold(ast.NodeTransformer):
    """Literals only, plain arithmetic and truth only: nothing here can call code or build a huge value."""

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        taken = _truth(node.test)
        return node if taken is None else (node.body if taken else node.orelse)

    visit_IfExp = visit_If  # the same rule for `a if c else b`

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        # `None or f()` is `f()`: a constant that cannot decide an `or` (falsy) or an `and` (truthy) is dropped;
        # the last operand stays, since its value is the result
        self.generic_visit(node)
        inert = isinstance(node.op, ast.And)
        kept = [v for v in node.values[:-1] if _truth(v) is not inert] + node.values[-1:]
        return kept[0] if len(kept) == 1 else ast.BoolOp(node.op, kept)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        op = _ARITHMETIC.get(type(node.op))
        left, right = node.left, node.right
        if op and all(isinstance(n, ast.Constant) and _number(n.value) for n in (left, right)):
            try:
                return ast.Constant(op(left.value, right.value))
            except (ZeroDivisionError, OverflowError):
                return node
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        operand = node.operand
        if isinstance(node.op, ast.USub) and isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.USub):
            return operand.operand  # --x
        if isinstance(node.op, ast.Not) and isinstance(operand, ast.Constant):
            return ast.Constant(not operand.value)
        return node


def _truth(test: ast.expr) -> bool | None:
    return bool(test.value) if isinstance(test, ast.Constant) else None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
