"""Classes: a method called once inlined with `self` as its instance, what that leaves of the instance read from
its constructor's arguments, a dataclass's field read as its default, and a class left empty dropped."""

from __future__ import annotations

import ast
import copy
import re
from collections import Counter
from collections.abc import Callable, Iterator

from ..scale.ids import callee_name
from ..source import replace_node
from .common import _nth
from .functions import (
    _Substitute,
    _arguments,
    _assigned,
    _bind,
    _is_simple,
    _returns_early,
    _statement_slots,
    _without_docstring,
)


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
            elif (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == name
                and target.attr.lstrip("_")
                and target.attr.lstrip("_") not in used
            ):  # set here once, read elsewhere (`server._offload.name`): a name of its own, not the instance's
                uses = _attribute_uses(tree, name, target.attr)
                if sum(not isinstance(n.ctx, ast.Load) for n in uses) != 1:
                    continue
                local = target.attr.lstrip("_")
                new = copy.deepcopy(tree)
                for node in _attribute_uses(new, name, target.attr):
                    replace_node(new, node, ast.Name(local, type(node.ctx)()))
                yield new


def dataclass_defaults(tree: ast.Module) -> Iterator[ast.Module]:
    """`Config().root` of a dataclass built without that field reads the field's default as written:
    `field(default_factory=lambda: tempfile.mkdtemp())` gives `tempfile.mkdtemp()`, `root: str = 'x'` gives `'x'`; so
    does `Config(args.ckpt, '80MB').root`, where neither a positional argument nor a keyword sets `root` (what the
    other arguments computed goes with the call, for the oracle to judge). The class then falls to the passes that
    drop what nothing reads."""
    classes = {c.name: _init_fields(c) for c in tree.body if isinstance(c, ast.ClassDef)}

    def default(read: ast.Attribute) -> ast.expr | None:
        call = read.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            return None
        init = classes.get(call.func.id)
        if init is None:
            return None
        if _spread(call):
            return None
        positional, fields = init
        set_ = {*positional[: len(call.args)], *(k.arg for k in call.keywords)}
        field_ = fields.get(read.attr)
        if field_ is None or field_.value is None or read.attr in set_:
            return None
        return _field_default(field_.value)

    yield from _reads_replaced(tree, default)


def _init_fields(cls: ast.ClassDef) -> tuple[list[str], dict[str, ast.AnnAssign]] | None:
    """A dataclass's fields as its generated `__init__` takes them: the names it takes by position, in order, and
    every field by name. None where the class does not show that: a base's fields come first, a written `__init__` or
    `__post_init__` may set any field, `@dataclass(init=False)` generates none."""
    decorators = [d for d in cls.decorator_list if callee_name(d) == "dataclass"]
    options = {k.arg: k.value for d in decorators if isinstance(d, ast.Call) for k in d.keywords}
    methods = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
    generated = _is_true(options.get("init", ast.Constant(True)))
    if not decorators or cls.bases or not generated or methods & {"__init__", "__post_init__"}:
        return None
    keyword_only = _is_true(options.get("kw_only"))
    positional, fields = [], {}
    for f in cls.body:
        if not (isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)):
            continue
        annotation = ast.unparse(f.annotation)
        if annotation.endswith("KW_ONLY"):  # `_: KW_ONLY`: the fields after it are taken by keyword only
            keyword_only = True
            continue
        if "ClassVar" in annotation:
            continue
        settings = {k.arg: k.value for k in f.value.keywords} if _is_field_call(f.value) else {}
        if not _is_true(settings.get("init", ast.Constant(True))):  # `field(init=False)`: set elsewhere, if at all
            continue
        fields[f.target.id] = f
        if not (keyword_only or _is_true(settings.get("kw_only"))):
            positional.append(f.target.id)
    return positional, fields


def _is_field_call(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and callee_name(value.func) == "field"


def _is_true(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is True


def init_values(tree: ast.Module) -> Iterator[ast.Module]:
    """`Backend(args.model_dir)._offload.name`, read off an instance built in place, is the value its `__init__`
    set as written, where that value reads neither the instance nor a parameter (`self._offload =
    tempfile.TemporaryDirectory()`: `tempfile.TemporaryDirectory().name`); where `__init__` keeps a parameter as it
    came (`self.config = config`), the argument the call passed for it (`Server(Config()).config`: `Config()`). The
    class then falls to the passes that drop what nothing reads."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef) and not c.decorator_list}
    values = {name: _own_values(c) for name, c in classes.items()}

    def value(read: ast.Attribute) -> ast.expr | None:
        call = read.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.func.id not in classes:
            return None
        own = values[call.func.id].get(read.attr)
        return own if own is not None else _kept_argument(classes[call.func.id], call, read.attr)

    yield from _reads_replaced(tree, value)


def _kept_argument(cls: ast.ClassDef, call: ast.Call, attr: str) -> ast.expr | None:
    """The argument `call` passes for the parameter that `__init__` stores as `self.attr` as it came (its default
    where the call passes none), or None: not stored so, set again, or passed through `*args`/`**kwargs`. Not
    `_arguments`, which refuses keyword-only parameters and `**rest` (an inlined body may read them): only the one
    parameter's argument is read here."""
    init, values = _set_once(cls)
    value = values.get(attr)
    if init is None or not isinstance(value, ast.Name) or _spread(call):
        return None
    positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
    if value.id in positional and positional.index(value.id) < len(call.args):
        return call.args[positional.index(value.id)]
    passed = next((k.value for k in call.keywords if k.arg == value.id), None)
    if passed is not None:
        return passed
    defaults = dict(zip(positional[len(positional) - len(init.args.defaults) :], init.args.defaults, strict=True))
    defaults |= {a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True) if d is not None}
    return defaults.get(value.id)


def _spread(call: ast.Call) -> bool:
    """`f(*args)` or `f(**kwargs)`: which parameters they fill is not written."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def _reads_replaced(tree: ast.Module, value: Callable[[ast.Attribute], ast.expr | None]) -> Iterator[ast.Module]:
    """One candidate for each attribute read that `value` resolves: the read replaced by what it gives."""
    reads = [
        i
        for i, n in enumerate(n for n in ast.walk(tree) if isinstance(n, ast.Attribute))
        if isinstance(n.ctx, ast.Load) and value(n) is not None
    ]
    for index in reads:
        new = copy.deepcopy(tree)
        node = _nth(new, ast.Attribute, index)
        found = value(node)
        if found is not None and replace_node(new, node, copy.deepcopy(found)):
            yield new


def _own_values(cls: ast.ClassDef) -> dict[str, ast.expr]:
    """Attribute -> value, for each `self.attr = value` at the top of `__init__` whose value reads neither the
    instance nor a parameter, and that nothing else in `__init__` sets again."""
    init, values = _set_once(cls)
    if init is None:
        return {}
    params = {a.arg for a in ast.walk(init.args) if isinstance(a, ast.arg)}
    return {
        attr: value
        for attr, value in values.items()
        if not {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} & params
    }


def _set_once(cls: ast.ClassDef) -> tuple[ast.FunctionDef | None, dict[str, ast.expr]]:
    """The class's `__init__` (None where it has none, or no `self`) and attribute -> value for each `self.attr =
    value` at its top that nothing else in it sets again (an `if` may)."""
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None or not init.args.args:
        return None, {}
    this = init.args.args[0].arg
    stores = Counter(
        n.attr
        for n in ast.walk(init)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and getattr(n.value, "id", None) == this
    )
    return init, {attr: value for attr, value in _attributes_set(init) if stores[attr] == 1}


def _attributes_set(init: ast.FunctionDef) -> Iterator[tuple[str, ast.expr]]:
    """(attribute, value) of each `self.attr = value` at the top of `__init__`."""
    this = init.args.args[0].arg
    for stmt in init.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == this:
            yield target.attr, stmt.value


def _field_default(value: ast.expr) -> ast.expr | None:
    """What a dataclass field's default evaluates to, as an expression: the value, or a default factory's call."""
    if _is_field_call(value):
        assert isinstance(value, ast.Call)
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
    out = {}
    for attr, value in _attributes_set(init):
        if isinstance(value, ast.Name) and value.id in bound and not _assigned(init, value.id):
            out[attr] = bound[value.id]
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
