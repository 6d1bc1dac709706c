"""Reduction passes. The ordered lists at the bottom are the registry: add a pass by adding a function.

Two shapes of pass:
- a *generator* ``(tree) -> Iterator[ast.Module]`` proposes one local simplification per candidate; the
  search accepts the first interesting one and asks again (wrapped by `greedy`);
- a *ddmin pass* ``(problem) -> None`` drives delta debugging over a list (statements, lines).
Passes never run code: they only propose. `reducers.search.Problem` answers interesting / not.
"""

from __future__ import annotations

import ast
import copy
import difflib
import operator
import re
from collections.abc import Callable, Iterator

from minrepro.harness._bootstrap import read_key, reads_input  # the profile's rule for a config read: one definition

from .scale import SHRINK, TOKEN_ID, VOCABULARY, callee_name
from .ddmin import ddmin
from .search import Problem, ShadowFull, seeding_calls
from .source import header_end, merge_edits, replace_node

Generator = Callable[[ast.Module], Iterator[ast.Module]]
Pass = Callable[[Problem], None]


# --- helpers ------------------------------------------------------------------------------------------


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


# --- generators ---------------------------------------------------------------------------------------


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


def inline_methods(tree: ast.Module) -> Iterator[ast.Module]:
    """A method called once, as a statement or `y = obj.m(...)`, on an instance of a module-level class (`C(...).m()`,
    or `x.m()` where `x = C(...)` is the only binding of `x`), is replaced by its body with `self` as that instance:
    a serving script's `server.start()` becomes the loads it makes, `self.model = ...` reading `server.model = ...`.
    Without it a class-based script kept its class around the failing call (23 lines where the function-based job
    gave 11)."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    for k, (block, i) in enumerate(_statement_slots(tree)):
        if _method_call(tree, classes, block[i]) is not None:
            new = copy.deepcopy(tree)
            if _inline_method(new, *_statement_slots(new)[k]):
                yield new


def _method_call(tree: ast.Module, classes: dict, stmt: ast.stmt) -> tuple[ast.Call, ast.FunctionDef] | None:
    """The call in `stmt` (`obj.m(...)` or `y = obj.m(...)`) and the method it calls, where inlining it is sound."""
    call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    obj, name = call.func.value, call.func.attr
    if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Name):
        cls = obj.func.id
    elif isinstance(obj, ast.Name):
        made = [
            s.value.func.id
            for s in ast.walk(tree)
            if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == obj.id for t in s.targets)
            and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Name)
        ]
        binds = [
            n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == obj.id and isinstance(n.ctx, ast.Store)
        ]
        cls = made[0] if len(made) == 1 and len(binds) == 1 else None
    else:
        return None
    method = next(
        (f for f in getattr(classes.get(cls), "body", []) if isinstance(f, ast.FunctionDef) and f.name == name), None
    )
    if (
        method is None
        or name.startswith("__")
        or method.decorator_list
        or not method.args.args
        or _returns_early(method)
        or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(method))
        or any(isinstance(n, ast.Name) and n.id in ("super", "__class__") for n in ast.walk(method))
        or sum(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(tree)) != 1  # called here only
    ):
        return None
    return call, method


def _inline_method(tree: ast.Module, block: list[ast.stmt], index: int) -> bool:
    stmt = block[index]
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    call, method = _method_call(tree, classes, stmt)
    inlined = copy.deepcopy(method)
    instance = call.func.value
    if isinstance(instance, ast.Call):  # `C(...).m()`: the instance gets a name, as a maintainer would write it
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", instance.func.id).lower()
        while name in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}:
            name += "_"
        _Substitute({inlined.args.args[0].arg: ast.Name(name, ast.Load())}).visit(inlined)
        inlined.args.args[0].arg = name
    binds = _bind(inlined, ast.Call(ast.Name("_", ast.Load()), [instance, *call.args], call.keywords))
    if binds is None:
        return False
    body = _without_docstring(inlined.body)
    if body and isinstance(body[-1], ast.Return):
        ret = body.pop()
        if isinstance(stmt, ast.Assign) and ret.value is not None:
            body.append(ast.Assign(stmt.targets, ret.value))
        elif ret.value is not None:
            body.append(ast.Expr(ret.value))
    elif isinstance(stmt, ast.Assign):
        body.append(ast.Assign(stmt.targets, ast.Constant(None)))
    block[index : index + 1] = binds + body
    owner = next(c for c in classes.values() if method in c.body)
    owner.body.remove(method)
    owner.body = owner.body or [ast.Pass()]
    return True


def flatten_instances(tree: ast.Module) -> Iterator[ast.Module]:
    """What a method's inlining leaves of an instance (`server = Server(ServerConfig())`, bound once): a read of an
    attribute its `__init__` set from a parameter becomes the argument (`server.config.root` reads
    `ServerConfig().root`; a call only where it is read once), and an attribute set and never read is its value
    alone (`server.model = dispatch_model(...)` becomes the call). The instance, then its class, fall to the passes
    that drop what nothing reads."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    # names outside the classes (a method's parameter `config` is no clash for a module-level `config`)
    used = {n.id for s in tree.body if not isinstance(s, ast.ClassDef) for n in ast.walk(s) if isinstance(n, ast.Name)}
    for name, call in _instances(tree, classes).items():
        init = next(
            (f for f in classes[call.func.id].body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
        )
        for attr, value in _constructor_values(init, call).items():
            uses = _attribute_uses(tree, name, attr)
            if not uses or any(not isinstance(n.ctx, ast.Load) for n in uses):
                continue
            new = copy.deepcopy(tree)
            if _is_simple(value) or len(uses) == 1:
                replacement = value
            elif attr not in used and _argument(call, value) is not None:  # evaluated once, then `config`
                replacement = ast.Name(attr, ast.Load())
                made = next(s for s in new.body if isinstance(s, ast.Assign) and ast.dump(s.value) == ast.dump(call))
                replace_node(made.value, _argument(made.value, value), ast.Name(attr, ast.Load()))
                new.body.insert(new.body.index(made), ast.Assign([ast.Name(attr, ast.Store())], copy.deepcopy(value)))
            else:
                continue
            for node in _attribute_uses(new, name, attr):
                replace_node(new, node, copy.deepcopy(replacement))
            yield new
        for k, stmt in enumerate(tree.body):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == name
                and len(_attribute_uses(tree, name, target.attr)) == 1  # set here, read nowhere
            ):
                new = copy.deepcopy(tree)
                new.body[k] = ast.Expr(new.body[k].value)
                yield new


def dataclass_defaults(tree: ast.Module) -> Iterator[ast.Module]:
    """`Config().root` of a dataclass built without arguments reads the field's default as written:
    `field(default_factory=lambda: tempfile.mkdtemp())` gives `tempfile.mkdtemp()`, `root: str = 'x'` gives `'x'`.
    The class then falls to the passes that drop what nothing reads."""
    defaults = {
        c.name: {
            f.target.id: _field_default(f.value)
            for f in c.body
            if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name) and f.value is not None
        }
        for c in tree.body
        if isinstance(c, ast.ClassDef) and any(callee_name(d) == "dataclass" for d in c.decorator_list)
    }
    reads = [
        i
        for i, n in enumerate(n for n in ast.walk(tree) if isinstance(n, ast.Attribute))
        if isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and not n.value.args
        and not n.value.keywords
        and defaults.get(n.value.func.id, {}).get(n.attr) is not None
    ]
    for index in reads:
        new = copy.deepcopy(tree)
        node = _nth(new, ast.Attribute, index)
        if replace_node(new, node, copy.deepcopy(defaults[node.value.func.id][node.attr])):
            yield new


def _field_default(value: ast.expr) -> ast.expr | None:
    """What a dataclass field's default evaluates to, as an expression: the value, or a default factory's call."""
    if isinstance(value, ast.Call) and callee_name(value.func) == "field":
        for k in value.keywords:
            if k.arg == "default":
                return k.value
            if k.arg == "default_factory":
                return k.value.body if isinstance(k.value, ast.Lambda) else ast.Call(k.value, [], [])
        return None
    return value


def _instances(tree: ast.Module, classes: dict) -> dict[str, ast.Call]:
    """Module-level names bound once, to `C(...)` of a module-level class C whose methods are all gone but
    `__init__` (each inlined where it was called: an attribute a method reads or sets is the instance's business)."""
    found = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id in classes
            and all(f.name == "__init__" for f in classes[stmt.value.func.id].body if isinstance(f, ast.FunctionDef))
        ):
            name = stmt.targets[0].id
            stores = [
                n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
            ]
            if len(stores) == 1:
                found[name] = stmt.value
    return found


def _constructor_values(init: ast.FunctionDef | None, call: ast.Call) -> dict[str, ast.expr]:
    """Attribute -> the argument it holds, for each `self.attr = param` at the top of `__init__` (simple signatures)."""
    bound = _arguments(init, call, skip=1) if init is not None and init.args.args else None
    if not bound:
        return {}
    this = init.args.args[0].arg
    out = {}
    for stmt in init.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == this
            and isinstance(stmt.value, ast.Name)
            and stmt.value.id in bound
            and not _assigned(init, stmt.value.id)
        ):
            out[target.attr] = bound[stmt.value.id]
    return out


def _argument(call: ast.Call, value: ast.expr) -> ast.expr | None:
    """The argument node of `call` that is `value` as written (the same dump); None for a default."""
    return next((a for a in [*call.args, *(k.value for k in call.keywords)] if ast.dump(a) == ast.dump(value)), None)


def _attribute_uses(tree: ast.AST, name: str, attr: str) -> list[ast.Attribute]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and n.value.id == name
    ]


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


def unwrap_calls(tree: ast.Module) -> Iterator[ast.Module]:
    """A call statement is replaced by one of its arguments: `sys.exit(main())` becomes `main()`."""

    def arguments(stmt: ast.AST) -> list:
        call = stmt.value
        if not isinstance(call, ast.Call):
            return []
        return [ast.Expr(a) for a in call.args if not isinstance(a, ast.Starred)]

    yield from _edits(tree, ast.Expr, arguments)


def drop_unused_parameters(problem: Problem) -> None:
    """Parameters a function never reads go, with the arguments every call passes for them: all at once first
    (one run), then one at a time. `settings` passed to functions that ignore it keeps a whole class alive."""
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
    """Module-level functions with plain parameters, used only by calls that pass nothing unpacked."""
    plain = []
    for func in tree.body:
        if not isinstance(func, ast.FunctionDef) or func.decorator_list or func.args.vararg or func.args.kwarg:
            continue
        uses = [
            n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == func.name and isinstance(n.ctx, ast.Load)
        ]
        calls = _calls_of(tree, func.name)
        if (
            len(uses) == len(calls)
            and not any(isinstance(a, ast.Starred) for c in calls for a in c.args)
            and not any(k.arg is None for c in calls for k in c.keywords)
        ):
            plain.append(func.name)
    return plain


def _unused_parameters(name: str, tree: ast.Module) -> list[str]:
    func = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == name)
    read = {n.id for stmt in func.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    if "locals" in read or "vars" in read:
        return []
    return [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs] if a.arg not in read]


def _without_parameters(tree: ast.Module, drops: list[tuple[str, str]]) -> str | None:
    new = copy.deepcopy(tree)
    for name, param in drops:
        func = next(f for f in new.body if isinstance(f, ast.FunctionDef) and f.name == name)
        positional = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
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


def constant_attributes(tree: ast.Module) -> Iterator[ast.Module]:
    """An option read like `args.hidden` becomes a literal (1, then None): parsers and configs can go. Not a module's
    attribute (`torch.bfloat16`: dropping the argument says the same), nor one that is called or read further
    (`torch.tensor(...)` as `1(...)`, `cfg.sizes[0]` as `None[0]`): those only fail otherwise, a run each (at E4B
    the pass judged 36-59 candidates for 2 taken, 48-80 s)."""
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


def _twin_configs(tree: ast.AST) -> set[str]:
    """The dict literals (by their dump) that configure a twin: `AutoConfig.for_model(type, **{...})` as the
    scale-down writes it, and every config nested in one (a tower's)."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "for_model"
    ]
    return {ast.dump(d) for c in calls for d in ast.walk(c) if isinstance(d, ast.Dict)}


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
    parent. Each is one candidate; dropping entries one at a time (`drop_dict_entries`) took 113 runs."""

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


def drop_empty_classes(tree: ast.Module) -> Iterator[ast.Module]:
    """A class whose body is only `pass` or a docstring (what a reduction leaves of a config holder, passed to calls
    that ignore it) goes, with every argument that names it: `class WorkerConfig: pass` ... `Job(WorkerConfig)`."""
    for cls in [
        n
        for n in tree.body
        if isinstance(n, ast.ClassDef)
        and not n.bases
        and not n.decorator_list
        and all(
            isinstance(b, ast.Pass) or (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)) for b in n.body
        )
    ]:
        new = copy.deepcopy(tree)
        new.body = [n for n in new.body if not (isinstance(n, ast.ClassDef) and n.name == cls.name)]
        for call in [n for n in ast.walk(new) if isinstance(n, ast.Call)]:
            names = lambda e: {x.id for x in ast.walk(e) if isinstance(x, ast.Name)}  # noqa: E731
            call.args = [a for a in call.args if cls.name not in names(a)]
            call.keywords = [k for k in call.keywords if cls.name not in names(k.value)]
        yield new


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


# --- ddmin passes ------------------------------------------------------------------------------------


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


# --- fact-driven passes (what a run of the current program showed, measured by the driver) ---------------


def slice_to_failure(problem: Problem) -> None:
    """Everything off the failure's backward slice goes in one candidate: statements after the failing one never
    ran, and of those before, only the ones that bind or touch what the failing statement reads are kept."""
    failing = problem.facts.get("failing_statement")
    tree = ast.parse(problem.current)
    at = [i for i, stmt in enumerate(tree.body) if ast.unparse(stmt) == failing]
    if not at:
        return
    keep = backward_slice(tree.body, at[-1])
    candidates = [_module([tree.body[i] for i in keep]), _module(tree.body[: at[-1] + 1])]
    found = problem.first_interesting([c for c in candidates if c != problem.current])
    if found is not None:
        problem.accept([c for c in candidates if c != problem.current][found])


def drop_unexecuted(problem: Problem) -> None:
    """Module-level statements that never ran in the failing run go in one candidate: a `try` body's tail after the
    failing call (a wrapper that re-raises keeps the failing statement the whole `try` to the slice), a branch not
    taken. Only the module's own lines are traced, so function and class bodies are left to the other passes."""
    executed = problem.facts.get("executed")
    if not executed:
        return
    tree = ast.parse(problem.current)
    if not _drop_unrun(tree.body, set(executed)):
        return
    candidate = _module(tree.body)
    if candidate != problem.current and problem.first_interesting([candidate]) is not None:
        problem.accept(candidate)


def _drop_unrun(block: list[ast.stmt], ran: set[int]) -> bool:
    """Remove, in place, the statements of `block` (and of its module-level sub-blocks) none of whose lines ran."""
    keep = [s for s in block if any(line in ran for line in range(s.lineno, (s.end_lineno or s.lineno) + 1))]
    changed = len(keep) < len(block)
    block[:] = keep or [ast.Pass()]
    for stmt in keep:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)):
            continue  # bodies run in frames the profile does not trace (or, for match, by case)
        subs = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if getattr(stmt, f, None)]
        subs += [h.body for h in getattr(stmt, "handlers", [])]
        for sub in subs:
            changed |= _drop_unrun(sub, ran)
    return changed


def backward_slice(body: list[ast.stmt], failing: int) -> list[int]:
    """Indices of the statements the failing one depends on: those binding a name it (transitively) reads (the
    module docstring binds `__doc__`, which an argparse description often reads), those
    that read a kept object other than a module (a method call may mutate it: `model.eval()`), and those that seed
    a generator (`torch.manual_seed(0)` writes global state no name carries; the search keeps every seed anyway,
    so a slice without one was refused: nightly_quant_report's was)."""
    modules = {
        (a.asname or a.name).split(".")[0] for s in body if isinstance(s, (ast.Import, ast.ImportFrom)) for a in s.names
    }
    relevant = _reads(body[failing])
    keep = {failing}
    for index in reversed(range(failing)):
        stmt = body[index]
        binds, reads = _binds(stmt), _reads(stmt)
        if index == 0 and header_end([stmt]):  # the module docstring binds `__doc__`: `description=__doc__...`
            binds = binds | {"__doc__"}
        if binds & relevant or (reads & relevant) - modules or seeding_calls(_module([stmt])):
            keep.add(index)
            relevant |= reads
    return sorted(keep)


def _reads(stmt: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _binds(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _module(body: list[ast.stmt]) -> str:
    return ast.unparse(ast.Module(body, [])) + "\n"


def resolve_recorded_values(problem: Problem) -> None:
    """Option and config reads (`args.steps`, `cfg['eval']['seed']`) whose value never changed during the run become
    that literal: all at once first, then one config object at a time, then one read at a time. The parser, the
    dataclass or the dict behind them is then dead."""
    # a recorded value is a literal's source; anything else (a str-valued enum's repr, recorded by an older
    # bootstrap: `<TaskType.CAUSAL_LM: 'CAUSAL_LM'>`) is not a value this pass can write back. Nor is a path of this
    # machine: a run's temp dir written back made `offload_dir='/tmp/minrepro-fork-.../offload-...'` where the script
    # called `tempfile.mkdtemp()`, and `os.environ.get('CKPT', ...)` became the user's checkpoint directory
    values = {k: v for k, v in problem.facts.get("values", {}).items() if _is_literal(v) and not _holds_path(v)}
    tree = ast.parse(problem.current)
    written, inputs = _floats(tree), _input_names(tree)
    # a float the script computed (a loss, read once, so "never changed") is a result, not a setting: frozen,
    # it would turn the script's own check into a constant. One read from a file or the command line is a setting.
    keys = [
        k
        for k in _read_keys(problem.current)
        if k in values and (_floats(ast.parse(values[k])) <= written or _is_input(k, inputs))
    ]

    def resolved(batch: list[str]) -> str | None:
        present = [k for k in batch if k in _read_keys(problem.current)]  # an accepted batch took some already
        return _with_values(problem.current, {k: values[k] for k in present}) if present else None

    _accept_batches(problem, [keys, *_by_base(keys), *([k] for k in keys)], resolved)


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


def _input_names(tree: ast.AST) -> set[str]:
    """Names bound from what a file or the command line gave (`cfg = yaml.safe_load(fh)`, `args = p.parse_args()`,
    `model_args, data_args = parser.parse_args_into_dataclasses()`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(reads_input(n) for n in ast.walk(node.value)):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _is_input(key: str, inputs: set[str]) -> bool:
    """A read of a file's data or of the command line: its floats are settings, not results."""
    expr = ast.parse(key, mode="eval").body
    return reads_input(expr) or key.startswith("sys.argv[") or re.match(r"\w+", key).group() in inputs


def _holds_path(text: str) -> bool:
    """Whether a literal's source holds a path of this machine (a string, or one in a list or dict)."""
    return any(isinstance(n, ast.Constant) and is_machine_path(n.value) for n in ast.walk(ast.parse(text, mode="eval")))


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _floats(tree: ast.AST) -> set[float]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is float}


def _by_base(keys: list[str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(re.match(r"\w+", key).group(), []).append(key)
    return list(groups.values()) if len(groups) > 1 else []


def _read_keys(source: str) -> list[str]:
    return list(dict.fromkeys(k for k in map(read_key, ast.walk(ast.parse(source))) if k is not None))


def _with_values(source: str, values: dict[str, str]) -> str:
    class Replace(ast.NodeTransformer):
        def _visit(self, node: ast.Attribute | ast.Subscript | ast.Call) -> ast.AST:
            if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):  # `cfg['a']['b'] = 1` writes into cfg['a']
                if isinstance(node, ast.Subscript):
                    node.slice = self.visit(node.slice)
                return node
            key = read_key(node)
            if key in values:
                return ast.copy_location(ast.parse(values[key], mode="eval").body, node)
            return self.generic_visit(node)

        visit_Attribute = visit_Subscript = visit_Call = _visit

    return ast.unparse(ast.fix_missing_locations(Replace().visit(ast.parse(source)))) + "\n"


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


# --- what a maintainer runs as is: no unused or repeated imports, no dead stores, no paths of this machine -------


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
    goes. On a GPU box the run had the image's CUDA_VERSION, NCCL_* and TORCH_CUDA_ARCH_LIST: as `greedy(chain=True)`,
    all of them go in one candidate first, the ones the failure needs stay."""
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


# --- the registry ------------------------------------------------------------------------------------


def _render(tree: ast.Module) -> str | None:
    """Source for a proposed tree; a proposal that cannot be rendered is dropped, not fatal."""
    try:
        return ast.unparse(ast.fix_missing_locations(tree))
    except Exception:
        return None


def greedy(generate: Generator, chain: bool = False) -> Pass:
    """Run a generator pass: accept the first interesting proposal, ask again, until none is. With `chain`, every
    proposal taken in turn (`_chained`, untested) goes first among them: where each would be accepted anyway (three
    functions to inline, two `with` blocks to unwrap) that is one round instead of one per edit, and it rides in a
    batch of `jobs` candidates that runs at once (at E4B on a GPU each round cost 13 s)."""

    def run(problem: Problem) -> None:
        refused: set[tuple] = set()  # this turn's edits judged before the one taken: not judged again this turn
        while True:
            rendered = (_render(t) for t in generate(ast.parse(problem.current)))
            candidates = problem.order([c for c in rendered if c is not None])
            combined = _chained(generate, problem.current) if chain and len(candidates) > 1 else None
            if combined is not None and combined not in candidates:
                candidates.insert(0, combined)
            edits = [_edit(problem.current, c) for c in candidates]
            fresh = [i for i, edit in enumerate(edits) if edit not in refused]
            found = problem.first_interesting([candidates[i] for i in fresh])
            if found is None:
                return
            refused.update(edits[i] for i in fresh[:found])
            problem.accept(candidates[fresh[found]])

    run.__name__ = generate.__name__
    run.__doc__ = generate.__doc__
    return run


def sweep(generate: Generator) -> Pass:
    """Run a generator pass whose edits are small and mostly refused (an argument, a dict entry, an attribute read):
    every proposal is judged where the script fails (`Problem.screen`), then those that fail the same way go
    together (`merge_edits`) as one candidate, then in halves and quarters, then one by one (`_halvings`); the first
    taken starts the next sweep. At E4B on an H100 `greedy(drop_arguments)` took 8 edits in 146 s, each a batch or
    more of bad runs and a good run in turn; a sweep pays the good run once for the edits it merges."""

    def run(problem: Problem) -> None:
        refused: set[tuple] = set()  # edits judged this turn and not taken: not judged again this turn
        # edits that failed the same way where the script fails, this turn: after another edit is taken they go
        # straight to the merge, not to the screen again (at E4B on an H100 a serving job's `drop_arguments` sent
        # 231 candidates for 15 edits taken, most of them the same edits screened once per edit taken)
        screened: set[tuple] = set()
        while True:
            rendered = (_render(t) for t in generate(ast.parse(problem.current)))
            candidates = problem.order([c for c in rendered if c is not None])
            edits = [_edit(problem.current, c) for c in candidates]
            fresh = [i for i, edit in enumerate(edits) if edit not in refused]
            spans = [_span_edit(problem.current, c) for c in candidates]
            unknown = [i for i in fresh if spans[i] not in screened]
            passed = {unknown[i] for i in problem.screen([candidates[i] for i in unknown])}
            hits = [i for i in fresh if i in passed or spans[i] in screened]
            refused.update(edits[i] for i in unknown if i not in passed)
            screened.update(spans[i] for i in hits)
            if not hits:
                return
            tries: list[tuple[str, list[int]]] = []  # (candidate, the hits it makes), largest first
            for group in _halvings(hits):
                # as the current program is written (a rendered candidate lacks its final newline: an edit of the
                # last token would otherwise take that newline too, and collide with every other edit)
                merged, taken = merge_edits(problem.current, [candidates[i].rstrip("\n") + "\n" for i in group])
                if taken > 1 and merged not in (t for t, _ in tries):
                    tries.append((merged, group))
            tries += [(candidates[i], [i]) for i in hits]
            found = problem.first_interesting([t for t, _ in tries])
            if found is None:
                return
            # the single edits refused where the bug is fixed
            refused.update(edits[members[0]] for _, members in tries[:found] if len(members) == 1)
            problem.accept(tries[found][0])

    run.__name__ = generate.__name__
    run.__doc__ = generate.__doc__
    return run


def _edit(before: str, after: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A candidate as the lines it takes out and puts in: after another edit is taken elsewhere, a refused edit
    proposes the same lines again (at E4B on an H100 `drop_arguments` judged 120 candidates in 146 s for 8 taken, each
    taken one sending the turn back to its start). One whose lines the taken edit changed is another edit. Each turn
    starts afresh, so a round that changes nothing judged every edit: the fixpoint is the same kind."""
    old, new = before.splitlines(), after.splitlines()
    out: list[str] = []
    put: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            out += old[i1:i2]
            put += new[j1:j2]
    return tuple(out), tuple(put)


def _halvings(hits: list[int], levels: int = 3) -> list[list[int]]:
    """All the hits, then halves, then quarters (groups of two or more): where the edits taken together are refused
    (two that each keep the failure but not both, or one refused where the bug is fixed), the largest group without
    the culprit is taken in the same batch of runs, not one edit per sweep."""
    groups, parts = [], 1
    for _ in range(levels):
        size = -(-len(hits) // parts)
        if size < 2:
            break
        groups += [hits[k : k + size] for k in range(0, len(hits), size)]
        parts *= 2
    return [g for g in groups if len(g) > 1]


def _span_edit(before: str, after: str) -> tuple[str, str, int]:
    """A candidate as the text it takes out and puts in, and which occurrence of that text: unlike `_edit`'s lines,
    often the same when another edit on its line was taken (`f(a=1, b=2, c=3)` without `b=2` is `('b=2, ', '', 0)`,
    and so is `f(b=2, c=3)` without it), not always (`f(a=1, b=2)` without it is `(', b=2', '', 0)`): a key that
    changes costs one more screen. One that stays while an earlier copy of its text goes may stand for another
    edit: that edit skips the screen, and is judged in full all the same."""
    before, after = before.rstrip("\n"), after.rstrip("\n")  # a rendered candidate lacks the final newline
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1
    removed = before[start : len(before) - end]
    return removed, after[start : len(after) - end], before.count(removed, 0, start) if removed else start


def _chained(generate: Generator, source: str, limit: int = 32) -> str | None:
    """The pass's first proposal applied, then the first proposal on that, and so on (at most `limit` edits); None
    unless it made more than one edit (one edit is a proposal already)."""
    current, edits = source, 0
    for _ in range(limit):
        following = next(
            (r for r in map(_render, generate(ast.parse(current))) if r is not None and r != current), None
        )
        if following is None:
            break
        current, edits = following, edits + 1
    return current if edits > 1 else None


def together(name: str, *passes: Pass) -> Pass:
    """The passes' edits, each taken as if it were accepted (`Problem.shadow`), as one candidate; nothing if it is
    not interesting (the passes then run one by one, as before). At E4B on an H100 each accepted candidate cost a bad
    and a good run, 7-17 s, one after another: the rewrites that only restructure (unwrap `main()`, inline it, drop
    the environment's settings) were eight such steps before the slice, about 100 s."""

    def run(problem: Problem) -> None:
        shadow = problem.shadow()
        try:
            for each in passes:
                each(shadow)
        except ShadowFull:
            pass
        if shadow.current != problem.current and problem.first_interesting([shadow.current]) is not None:
            problem.accept(shadow.current)

    run.__name__ = name
    run.__doc__ = f"{name}: {', '.join(p.__name__ for p in passes)}, in one candidate"
    return run


# What a run showed first (the biggest cuts, in one candidate each), then structure (cheap, big steps), then
# statements, then definitions and details.
PASSES: list[Pass] = [
    # what only restructures the script, all in one candidate first. Not the clean-up after the slice: taken blindly,
    # its first proposals drop the failing call with its unread result (refused on each of three jobs, a run lost)
    together(
        "restructure",
        greedy(drop_environment_settings),
        greedy(unwrap_main_guard),
        drop_duplicate_imports,
        greedy(inline_functions),
        greedy(fold_constants),
        greedy(inline_functions),
        greedy(unwrap_with),
    ),
    # the run's environment, written as the first lines of a prepared script: one candidate drops them all
    greedy(drop_environment_settings, chain=True),
    # `main()` under a guard hides the failing statement from the slice: unwrap and inline it first
    greedy(unwrap_main_guard),
    # the model first, then the text: a twin's stack cut to one layer per run of its devices makes every later
    # candidate cheaper (each E4B twin candidate built and offloaded 42 layers: about 20 s on an H100)
    greedy(fewer_layers),
    greedy(fewer_unplaced_layers),  # a stack no literal map places: its per-layer fields cut with it
    drop_duplicate_imports,  # the twin's `import tempfile` beside the script's own: one candidate
    greedy(drop_decorators),
    greedy(inline_functions, chain=True),
    resolve_recorded_values,  # before the slice: the parser and config objects then fall off it
    greedy(machine_paths),  # a path of this machine a resolved value brought in, while `tempfile` is still imported
    greedy(fold_constants),  # `if False: return 0` (a resolved `--dry-run`) blocks inlining `main()`
    greedy(inline_functions, chain=True),
    # a job inside `with tempfile.TemporaryDirectory() as root:` is one statement to the slice
    greedy(unwrap_with, chain=True),
    drop_unexecuted,
    slice_to_failure,
    drop_all_dead_definitions,
    greedy(unroll_comprehensions),  # `[server.answer(r) for r in requests]`: one call, which the next pass takes
    greedy(inline_methods, chain=True),  # a class around the failing call: `server.start()` becomes its body
    greedy(flatten_instances, chain=True),  # then the instance's attributes: its arguments, or its values alone
    greedy(dataclass_defaults, chain=True),  # `Config().root`: the field's default as written
    # what the slice leaves unread, each in one candidate: a budget that ends here still hands over a clean script
    drop_dead_assignments,
    drop_unused_imports,
    greedy(unwrap_raise, chain=True),
    greedy(unwrap_try, chain=True),
    greedy(unwrap_with, chain=True),
    greedy(unwrap_if, chain=True),
    greedy(unwrap_conditional_expressions, chain=True),
    greedy(unroll_loops),
    delete_statements,
    drop_all_dead_definitions,  # what the deleted statements read is dead now: one run, not one per name
    drop_unused_parameters,  # after the deletions, which leave parameters unread
    inline_single_use_variables,  # `root = mkdtemp()` read once: one line less each, all in one candidate
    greedy(unwrap_calls, chain=True),
    greedy(inline_functions, chain=True),
    greedy(inline_nested_calls, chain=True),
    greedy(remove_dead_definitions, chain=True),
    sweep(constant_attributes),
    drop_dead_assignments,
    drop_unused_imports,
    sweep(drop_arguments),
    greedy(coarsen_device_maps),  # before entries go one by one
    greedy(fewer_unplaced_layers),  # a map coarsened to its root entry no longer places the layers
    sweep(drop_dict_runs),
    sweep(drop_dict_entries),
    sweep(simplify_constants),
    greedy(simplify_idioms),  # what a maintainer would not write (issue: `os.path.join(x)`, a no-op `.to()`)
    greedy(drop_empty_classes),
    greedy(fold_constants),
    drop_all_dead_definitions,
]

# Last in each round: the forms a maintainer reads best, which the passes above (which read literal maps and lists)
# no longer need to read; then what the rewrites left unread; then lines.
FINAL_PASSES: list[Pass] = [
    greedy(shorten_device_maps),
    greedy(compact_lists),
    greedy(machine_paths),
    drop_dead_assignments,
    drop_unused_imports,
    drop_duplicate_imports,
    delete_lines,
]
