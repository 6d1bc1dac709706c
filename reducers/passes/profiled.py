"""Fact-driven passes: what a profiled run of the current program showed, measured by the driver
(`Problem.facts`): the statements that never ran dropped, the failure's backward slice, and option and config
reads whose value never changed written as that value.

Which reads the profile records is the profile's rule (`read_key` in the harness's bootstrap, which runs in the target
env without minrepro); it keys each value by the read's source, and a read here is one whose source is such a key
(`_recorded_reads`): the search knows nothing of the harness."""

from __future__ import annotations

import ast
import re

from ..search import Problem, seeding_calls
from ..source import header_end
from .common import _accept_batches, _module, _reads
from .hygiene import is_machine_path


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
    taken. Where the run recorded the lines of the script's own functions, a candidate before it also drops what never
    ran in their bodies (a method never called keeps its name, with `pass` for a body): a server's request handlers
    behind a load that fails. A function run only in another thread or process looks unrun: then the first candidate
    fails otherwise, and the module-level one stands alone."""
    executed = problem.facts.get("executed")
    if not executed:
        return
    tree = ast.parse(problem.current)
    _drop_unrun(tree.body, set(executed))
    candidates = [_module(tree.body)]
    in_functions = problem.facts.get("function_lines")
    if in_functions is not None and _drop_unrun_in_functions(tree, set(in_functions)):
        candidates.insert(0, _module(tree.body))
    candidates = [c for c in dict.fromkeys(candidates) if c != problem.current]
    found = problem.first_interesting(candidates) if candidates else None
    if found is not None:
        problem.accept(candidates[found])


def _drop_unrun_in_functions(tree: ast.Module, ran: set[int]) -> bool:
    """Remove, in place, the statements of each function's body (methods and nested functions too, each as its own
    body) none of whose lines ran; a method that never ran and whose name the script never reads (as a name, an
    attribute or a string: `getattr`) goes whole. Not a dunder: Python calls those where the profile no longer looks
    (`__del__` at exit)."""
    functions, classes, read = [], [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _dunder(node.name):
            functions.append(node)
        elif isinstance(node, ast.ClassDef):
            classes.append(node)
        elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            read.add(node.attr if isinstance(node, ast.Attribute) else node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            read.add(node.value)
    never = {id(f) for f in functions if not any(_ran(s, ran) for s in f.body)}
    changed = False
    for function in functions:
        changed |= _drop_unrun(function.body, ran)
    for cls in classes:
        keep = [s for s in cls.body if id(s) not in never or s.name in read]
        if len(keep) < len(cls.body):
            cls.body[:], changed = keep or [ast.Pass()], True
    return changed


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _ran(stmt: ast.stmt, ran: set[int]) -> bool:
    """Whether any line of `stmt` ran."""
    return any(line in ran for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))


def _drop_unrun(block: list[ast.stmt], ran: set[int]) -> bool:
    """Remove, in place, the statements of `block` (and of the sub-blocks that run in its frame) none of whose lines
    ran."""
    keep = [s for s in block if _declares(s) or _ran(s, ran)]
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


def _declares(stmt: ast.stmt) -> bool:
    """A statement that runs no line yet changes how its block's names bind: `global`, `nonlocal`, `x: int`."""
    return isinstance(stmt, (ast.Global, ast.Nonlocal)) or (isinstance(stmt, ast.AnnAssign) and stmt.value is None)


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


def _binds(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


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
        for k in _recorded_reads(problem.current, values)
        if _floats(ast.parse(values[k])) <= written or _is_input(k, inputs)
    ]

    def resolved(batch: list[str]) -> str | None:
        present = [k for k in batch if k in _recorded_reads(problem.current, values)]  # an accepted batch took some
        return _with_values(problem.current, {k: values[k] for k in present}) if present else None

    _accept_batches(problem, [keys, *_by_base(keys), *([k] for k in keys)], resolved)


# Calls that read a file's data (`yaml.safe_load(fh)`, `json.load(open(args.config))`, `Path(p).read_text()`): the
# names whose calls the profile records as reads (the bootstrap's own `FILE_READERS`; a test holds the two the same).
FILE_READERS = ("load", "loads", "safe_load", "full_load", "read", "read_text", "readlines")
# Calls that turn the command line into settings: the values read from what they return are inputs, like a file's.
ARGUMENT_PARSERS = ("parse_args", "parse_known_args", "parse_args_into_dataclasses")


def reads_input(node: ast.AST) -> bool:
    """True for a call that reads a file's data or parses the command line (see FILE_READERS)."""
    func = getattr(node, "func", None)
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return isinstance(node, ast.Call) and name in FILE_READERS + ARGUMENT_PARSERS


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


def _recorded_reads(source: str, values: dict[str, str]) -> list[str]:
    """The reads of `source` that `values` (the profile's, by the read's source) holds a value for, in the order they
    first appear."""
    return list(dict.fromkeys(k for k in map(_read_source, ast.walk(ast.parse(source))) if k in values))


def _read_source(node: ast.AST) -> str | None:
    """The source of what may be a recorded read (`args.steps`, `cfg['eval']['seed']`, `m.getint('layers')`): an
    attribute or a subscript that is read, not written to, or a call."""
    if not isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        return None
    return ast.unparse(node) if isinstance(getattr(node, "ctx", ast.Load()), ast.Load) else None


def _with_values(source: str, values: dict[str, str]) -> str:
    class Replace(ast.NodeTransformer):
        def _visit(self, node: ast.Attribute | ast.Subscript | ast.Call) -> ast.AST:
            if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):  # `cfg['a']['b'] = 1` writes into cfg['a']
                if isinstance(node, ast.Subscript):
                    node.slice = self.visit(node.slice)
                return node
            key = _read_source(node)
            if key in values:
                return ast.copy_location(ast.parse(values[key], mode="eval").body, node)
            return self.generic_visit(node)

        visit_Attribute = visit_Subscript = visit_Call = _visit

    return ast.unparse(ast.fix_missing_locations(Replace().visit(ast.parse(source)))) + "\n"
