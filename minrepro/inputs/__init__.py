"""What the user gave, as the plain Python source that every run executes: the *prepared script*.

A script with its arguments (`SCRIPT -- ARGS`), a notebook (`.ipynb`), a module (`-m pkg.module -- ARGS`) or a
command line (`-- accelerate launch ... job.py ARGS`) becomes one source, written to the cache (never beside or
over the user's files), that begins with what the original run had:

    import os, sys
    os.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'   # the run's variables (see record_env)
    sys.path.insert(0, '/home/me/job')   # where its own modules are, when it imports any
    sys.argv = ['train.py', '--model', 'tiny', '--bits', '4']
    __file__ = '/home/me/job/train.py'   # when the script reads it

Each of those lines is a statement like any other: the reduction keeps the ones the failure needs. Relative paths
to the script's config and data files, in its arguments and its calls, are made absolute (the runs start in empty
scratch directories); the values the run read from them are then inlined by the reduction where the failure does
not need the file itself. The variables moved into the script are taken out of the runs' environment, so that a
candidate without its line runs as the original would have without the variable.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Mapping, Sequence

from ..dirs import cache, without_local_paths
from ..errors import MinreproError
from ..harness.runner import RunResult, resolve_python
from ..reducers.source import header_end

# Variables that change what the libraries do: recorded from the original's run and set by the script's first lines.
ENV_PREFIXES = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "ACCELERATE_",
    "PEFT_",
    "BNB_",
    "BITSANDBYTES_",
    "PYTORCH_",
    "TORCH_",
    "TORCHDYNAMO_",
    "TORCHINDUCTOR_",
    "CUDA_",
    "CUBLAS_",
    "NCCL_",
    "TOKENIZERS_",
    "SAFETENSORS_",
)
ENV_NAMES = {
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "KMP_AFFINITY",
    "KMP_BLOCKTIME",
}
# Where files live, not how the libraries behave: they stay in the runs' environment, and the header names them.
ENV_PLACES = {
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "HF_ASSETS_CACHE",
    "HF_XET_CACHE",
    "HF_MODULES_CACHE",
    "TRANSFORMERS_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "TORCH_HOME",
    "TORCH_EXTENSIONS_DIR",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_CACHE_PATH",
    # torch sets this one itself in a process that imported it (a notebook kernel, a test runner)
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
}
# What a box's image says of itself (CUDA's, NGC's and PyTorch's images set dozens): no library under test reads
# them, so an output neither sets nor names them. BNB_CUDA_VERSION is read: it picks bitsandbytes' native library.
IMAGE_FACTS = re.compile(
    r"^(?!BNB_)\w+_VERSION$|^NV_|^NVIDIA_|^CUDA_(?:PKG|DRIVER)|^TORCH_CUDA_ARCH_LIST$|^PYTORCH_BUILD_"
)
SECRET = re.compile(r"(?:^|_)(?:TOKEN|KEY)(?:_|$)|SECRET|PASSWORD|CREDENTIAL")  # never written anywhere; named only
# Files a script reads as its settings or data (their relative paths are made absolute), and checkpoint folders.
READ_SUFFIXES = {".yaml", ".yml", ".json", ".jsonl", ".toml", ".ini", ".cfg", ".conf", ".txt", ".csv", ".tsv"}
# A checkpoint folder holds one of these, or has a subfolder that does (`ckpt/base`, `ckpt/adapter`, beside the
# tokenizer's files at its top)
CHECKPOINT_MARKS = ("config.json", "adapter_config.json", "tokenizer_config.json", "tokenizer.json")
# A failure the script's own text raises before any library runs: not a library bug to reduce.
DISPLAY_NOTE = "Jupyter's display() is print() here."
OWN_FAILURES = {
    "NameError",
    "UnboundLocalError",
    "SyntaxError",
    "IndentationError",
    "TabError",
    "ImportError",
    "ModuleNotFoundError",
    "FileNotFoundError",
}


@dataclass
class Prepared:
    """A prepared script and what the run of the user's input had."""

    name: str  # what the user gave, as the header names it: "train.py", "explore.ipynb", "-m pkg.train"
    path: Path  # the prepared source, in the cache
    source: str
    home: Path  # sys.path[0] of the original run: the script's or notebook's folder; the current one for -m
    out: Path  # the default output: <stem>.min.py beside what the user gave (in the current folder for -m)
    command: str  # the original command line
    env: dict[str, str] = field(default_factory=dict)  # variables set by the script's first lines
    held: dict[str, str] = field(default_factory=dict)  # variables the run had that stay in the environment
    notes: list[str] = field(default_factory=list)  # what a notebook lost, for the header
    files: list[str] = field(default_factory=list)  # the user's files the source names (absolute)
    original: Path = Path()  # the user's file (a script, a notebook, a module's source): never written

    def portable(self, command: str) -> str:
        """A command line as its user reads it anywhere: paths under the run's folder relative to it, others of this
        machine as placeholders."""

        def token(text: str) -> str:
            path = Path(text)
            if not path.is_absolute():
                return text
            try:
                return str(path.relative_to(self.home))
            except ValueError:
                return without_local_paths(text)

        try:
            return shlex.join(token(t) for t in shlex.split(command))
        except ValueError:  # unbalanced quotes: as given, less what a placeholder hides
            return without_local_paths(command)

    def header(self, body: str) -> list[str]:
        """The output header's lines about the input: the command line, the variables the run had that the output
        does not set, what a notebook lost, and the user's files the output still opens."""
        lines = [f"Original command: {self.portable(self.command)}"] if self.command else []
        kept = set(re.findall(r"os\.environ\[['\"](\w+)['\"]\]\s*=", body))
        others = {**{k: v for k, v in self.env.items() if k not in kept}, **self.held}
        if others:  # a place on this machine is named, not shown: the output names no path of the machine it ran on
            lines.append(
                "The run also had: "
                + ", ".join(
                    k if k in ENV_PLACES else f"{k}={without_local_paths(v)}" for k, v in sorted(others.items())
                )
            )
        lines += [n for n in self.notes if n != DISPLAY_NOTE or "display = print" in body]
        still = [f for f in self.files if repr(f)[1:-1] in body]
        if still:
            lines.append(
                "Opens " + ", ".join(still) + ": the failure depends on " + ("it" if len(still) == 1 else "them")
            )
        return lines


@dataclass(frozen=True)
class Invocation:
    """How the user ran it: its arguments (with no script: a whole command line), the folder it ran from and the
    environment it ran in (None: this process's), the variables a command line's launcher set (`extra`), and that
    command line (None: none was given)."""

    args: Sequence[str] = ()
    cwd: Path | None = None
    environ: Mapping[str, str] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    command: str | None = None


@dataclass(frozen=True)
class Program:
    """What runs: its name as the header gives it, the user's file, its source, the folder it imports from first
    (its `home`); where its reduction goes (None: <stem>.min.py beside the file), its package where it imports
    relatively, and the folder put first on sys.path (None: its home, where it imports from there)."""

    name: str
    given: Path
    source: str
    home: Path
    out: Path | None = None
    package: str | None = None
    path0: Path | None = None


def prepare(
    target: str | None, module: str | None = None, python: str | None = None, run: Invocation | None = None
) -> Prepared | None:
    """The prepared script for what the user gave; None for a plain script that runs as it is (no arguments, no
    variable to carry, no relative path to its own files)."""
    from .launch import is_command_line, read_command_line

    run = run or Invocation()
    cwd = (run.cwd or Path.cwd()).resolve()
    environ = os.environ if run.environ is None else run.environ
    args, extra, command = list(run.args), {}, None
    if target is None and module is None and is_command_line(args):
        launch = read_command_line(args, python)
        command = shlex.join(args)
        target, module = (None, launch.target) if launch.module else (launch.target, None)
        args, extra = launch.args, launch.env
    run = Invocation(args, cwd, environ, extra, command)
    if module is not None:
        if target is not None:
            raise MinreproError(f"give a SCRIPT or -m {module}, not both")
        return prepare_module(module, python, run)
    if target is None:
        raise MinreproError(
            "give a SCRIPT, a NOTEBOOK.ipynb, -m MODULE, or a command line after -- "
            "(`-- accelerate launch job.py ARGS`)"
        )
    if target.endswith(".ipynb"):
        return prepare_notebook(Path(target), run)
    return prepare_script(Path(target), run)


def prepare_script(path: Path, run: Invocation) -> Prepared | None:
    """`run`: as `prepare` leaves it (its folder and environment given)."""
    source = read_python(path)
    command = run.command or shlex.join(["python", str(path), *run.args])
    return _prepared(
        Program(path.name, path, source, path.resolve().parent),
        replace(run, command=command),
        plain_if_unchanged=run.command is None,
    )


def prepare_notebook(path: Path, run: Invocation) -> Prepared:
    """`run`: as `prepare` leaves it (its folder and environment given)."""
    from .notebook import convert, read_notebook

    if not path.is_file():
        raise MinreproError(f"no such notebook: {path}")
    converted = convert(read_notebook(path), path.name)
    notes = [f"From the notebook {path.name}: its {converted.cells} code cells in order, outputs ignored."]
    if converted.dropped:
        shown = converted.dropped[:6] + ([f"{len(converted.dropped) - 6} more"] if len(converted.dropped) > 6 else [])
        notes.append("Dropped: " + "; ".join(shown) + ".")
    if converted.uses_display:
        notes.append(DISPLAY_NOTE)
    source = converted.source
    if converted.uses_display:
        source = "display = print\n" + source
    if converted.sets_env:
        source = "import os\n" + source
    # Jupyter runs a notebook in its own folder: its relative paths are read from there
    home = path.resolve().parent
    args = run.args
    command = run.command or (f"the notebook {path} with sys.argv {[path.name, *args]}" if args else "")
    prepared = _prepared(Program(path.name, path, source, home), replace(run, cwd=home, command=command))
    prepared.notes = notes
    return prepared


def prepare_module(name: str, python: str | None, run: Invocation) -> Prepared:
    """`python -m NAME ARGS`: the module's source, found as the target interpreter finds it with the current folder
    first on its path; its package set where it imports relatively. `run`: as `prepare` leaves it."""
    cwd = run.cwd
    origin, package = find_module(name, python, cwd)
    source = read_python(origin)
    stem = name.rsplit(".", 1)[-1] if origin.name != "__main__.py" else name.split(".")[0]
    relative = any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(source)))
    program = Program(
        f"-m {name}",
        origin,
        source,
        cwd,
        out=cwd / f"{stem}.min.py",
        package=package if relative else None,
        path0=cwd if _under(origin, cwd) else None,
    )
    return _prepared(program, replace(run, command=run.command or shlex.join(["python", "-m", name, *run.args])))


FIND_MODULE = r"""
import importlib.util, json, sys
sys.path.insert(0, sys.argv[2])
spec = importlib.util.find_spec(sys.argv[1])
if spec is not None and spec.submodule_search_locations is not None:
    spec = importlib.util.find_spec(sys.argv[1] + ".__main__")
print("MINREPRO-MODULE " + json.dumps(None if spec is None or not spec.origin else [spec.origin, spec.parent]))
"""


def find_module(name: str, python: str | None, cwd: Path) -> tuple[Path, str]:
    """The file `python -m name` runs and its package, asked of the interpreter the runs use."""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        raise MinreproError(f"-m {name}: not a module name")
    interpreter = resolve_python(python)
    try:
        done = subprocess.run(
            [interpreter, "-c", FIND_MODULE, name, str(cwd)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise MinreproError(f"-m {name}: finding the module took over 300 s") from None
    found = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("MINREPRO-MODULE ")]
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise MinreproError(f"-m {name}: cannot find the module under {interpreter}: {last[:200]}")
    spot = json.loads(found[-1])
    if spot is None or not str(spot[0]).endswith(".py"):
        raise MinreproError(
            f"-m {name}: no module of Python source by that name under {interpreter} (searched from {cwd} first)"
        )
    return Path(spot[0]), spot[1] or ""


def _prepared(program: Program, run: Invocation, plain_if_unchanged: bool = False) -> Prepared | None:
    """`run`: its folder is where the arguments' and the source's relative paths are read from; its command is the
    one the header gives."""
    name, given, home = program.name, program.given, program.home
    source, package, path0 = program.source, program.package, program.path0
    args, environ, base = list(run.args), run.environ, run.cwd
    env, held = record_env(environ)
    env.update(run.extra)
    argv, files = absolute_arguments(args, base)
    source, named = absolute_paths(source, base)
    files += named
    if plain_if_unchanged and not args and not env and not named:
        return None
    if path0 is None and _imports_from(source, home):
        path0 = home
    reads_file = given.suffix == ".py" and any(
        isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(ast.parse(source))
    )
    lines = ["import sys"] if args or path0 else []
    lines += ["import os"] * bool(env)
    lines += [f"os.environ[{k!r}] = {v!r}" for k, v in env.items()]
    lines += [f"sys.path.insert(0, {str(path0)!r})"] * bool(path0)
    lines += [f"sys.argv = {[given.name if given.suffix == '.py' else name, *argv]!r}"] * bool(args)
    lines += [f"__file__ = {str(given.resolve())!r}"] * reads_file
    lines += [f"__package__ = {package!r}"] * bool(package)
    text = insert_prelude(source, lines)
    stem = given.stem if given.name != "__main__.py" else given.parent.name
    digest = hashlib.sha256(f"{given.resolve()}\0{text}".encode()).hexdigest()[:10]
    path = cache("inputs", f"{stem}-{digest}") / f"{stem}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return Prepared(
        name,
        path,
        text,
        home,
        program.out or given.resolve().with_name(f"{stem}.min.py"),
        run.command,
        env,
        held,
        files=sorted(set(files)) + ([str(given.resolve())] if reads_file else []),
        original=given.resolve(),
    )


def insert_prelude(source: str, lines: list[str]) -> str:
    """`lines` after the module's docstring and `from __future__` imports (which must come first)."""
    if not lines:
        return source
    body = ast.parse(source).body
    header = header_end(body)
    after = (body[header - 1].end_lineno or body[header - 1].lineno) if header else 0
    text = source.splitlines(keepends=True)
    first_code = body[0].lineno - 1 if body else len(text)
    while after < first_code and (not text[after].strip() or text[after].lstrip().startswith("#")):
        after += 1  # a shebang, a PEP 723 block, a licence header: they stay first
    return "".join(text[:after]) + "".join(f"{line}\n" for line in lines) + "".join(text[after:])


def record_env(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(variables the script sets at its top, variables that stay in the environment: places, and secrets by name
    only) from the environment the original runs in."""
    moved, held = {}, {}
    for key, value in sorted(environ.items()):
        if not (key.startswith(ENV_PREFIXES) or key in ENV_NAMES) or IMAGE_FACTS.search(key):
            continue
        if SECRET.search(key):
            held[key] = "(set; not recorded)"
        elif key in ENV_PLACES:
            held[key] = value
        else:
            moved[key] = value
    return moved, held


def take_env(prepared: Prepared | None, environ: os._Environ | dict | None = None) -> None:
    """The variables the prepared script sets leave this process's environment (which every run inherits): a
    candidate without its line must run without the variable."""
    environ = os.environ if environ is None else environ
    for key in prepared.env if prepared else ():
        environ.pop(key, None)


def absolute_arguments(args: list[str], base: Path) -> tuple[list[str], list[str]]:
    """The arguments with each one naming a config or data file (or a checkpoint folder) relative to `base` made
    absolute (`--config cfg.yaml`, `--config=cfg.yaml`), and those files."""
    out, files = [], []
    for arg in args:
        flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        candidate = value if (eq or not arg.startswith("-")) else ""
        found = _user_path(candidate, base) if candidate else None
        if found:
            files.append(found)
            out.append(f"{flag}={found}" if eq else found)
        else:
            out.append(arg)
    return out, files


def absolute_paths(source: str, base: Path) -> tuple[str, list[str]]:
    """The source with each string argument of a call that names a config or data file (or a checkpoint folder)
    relative to `base` made absolute, in place (only that literal changes), and those files."""
    tree = ast.parse(source)
    spots = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.lineno == arg.end_lineno:
                found = _user_path(arg.value, base)
                if found:
                    spots.append((arg.lineno, arg.col_offset, arg.end_col_offset, found))
    lines = source.splitlines(keepends=True)
    for lineno, start, end, found in sorted(spots, reverse=True):
        raw = lines[lineno - 1].encode()  # ast offsets count UTF-8 bytes
        lines[lineno - 1] = (raw[:start] + repr(found).encode() + raw[end:]).decode()
    return "".join(lines), [found for *_, found in spots]


def _subfolders(path: Path, most: int = 16) -> list[Path]:
    """A folder's first subfolders (a checkpoint's `base/` and `adapter/`), not a walk of a large tree."""
    found = []
    for entry in sorted(path.iterdir()):
        if entry.is_dir():
            found.append(entry)
            if len(found) == most:
                break
    return found


def _user_path(text: str, base: Path) -> str | None:
    if not text or "\n" in text or len(text) > 400 or os.path.isabs(text) or "://" in text:
        return None
    path = base / text
    try:
        if path.is_file() and path.suffix.lower() in READ_SUFFIXES:
            return str(path.resolve())
        if path.is_dir() and any(
            (folder / mark).is_file() for folder in (path, *_subfolders(path)) for mark in CHECKPOINT_MARKS
        ):
            return str(path.resolve())
    except OSError:
        return None
    return None


def _imports_from(source: str, home: Path) -> bool:
    """Whether the source imports a module that lives in `home` (the user's own helpers)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return any((home / f"{n}.py").is_file() or (home / n / "__init__.py").is_file() for n in names)


def _under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def read_python(path: Path) -> str:
    """The file's text if it is Python source; else a one-line error that says what it is (binary data, a notebook
    or other JSON, text that does not compile)."""
    if not path.is_file():
        raise MinreproError(f"no such script: {path}")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise MinreproError(f"{path} is not Python source: it holds binary data")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MinreproError(f"{path} is not Python source: it is not UTF-8 text (byte {exc.start})") from None
    if text.lstrip().startswith(("{", "[")):
        kind = _json_kind(text)
        if kind and path.suffix == ".ipynb":
            raise MinreproError(f"{path} is a notebook: reduce, check, signature and bisect read notebooks")
        if kind:
            raise MinreproError(f"{path} is not Python source: it holds {kind}")
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise MinreproError(f"{path} is not valid Python: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # source code string cannot contain null bytes, and the like
        raise MinreproError(f"{path} is not Python source: {exc}") from None
    return text


def _json_kind(text: str) -> str | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and "cells" in data and "nbformat" in data:
        return "a Jupyter notebook's JSON (give it as a .ipynb file: minrepro reads notebooks)"
    return "JSON data"


def refuse_own_failure(result: RunResult, name: str) -> None:
    """A failure raised by the script's own text before it reaches any library (no library frame on its stack; a
    NameError, SyntaxError, ImportError or missing file of its own) is not a library bug: a one-line error. A
    check of the script's own on a library's result (an AssertionError) stays a failure to reduce."""
    sig = result.signature
    if sig is None or sig.frames or sig.raised_by != "script" or sig.type not in OWN_FAILURES:
        return
    line = result.raw_headline.splitlines()[0] if result.raw_headline else sig.headline
    where = f" (line {result.script_lines[-1]})" if result.script_lines else ""
    hint = (
        ": a relative path is read from the folder minrepro runs in; give it absolute, or run from where the "
        "script expects"
        if sig.type == "FileNotFoundError"
        else ""
    )
    raise MinreproError(
        f"{name} fails in its own code{where}, with no library on its stack: {line[:160]} "
        f"(not a library failure to reduce{hint})"
    )


def split_arguments(argv: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """minrepro's own arguments and what follows the first `--` (the arguments of the user's run)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def prepare_names(
    names: list[str],
    args: Sequence[str],
    module: str | None,
    python: str | None,
) -> tuple[list[str], list[Prepared]]:
    """Case ids and script paths as `check` and `bisect` take them, with each input that needs preparing (a
    notebook, a script with arguments, -m MODULE, a command line after --) replaced by its prepared script's path;
    the variables those scripts set leave this process's environment."""
    if module or (args and not names):  # -m MODULE, or a whole command line after --
        if names:
            raise (
                MinreproError(f"give -m {module} or a script, not both")
                if module
                else MinreproError("give a command line after -- or SCRIPT -- ARGS, not both")
            )
        one = prepare(None, module, python, Invocation(args))
        take_env(one)
        return [str(one.path)], [one]
    if args and len(names) != 1:
        raise MinreproError("arguments after -- belong to one script: give one target with them")
    done, prepared = [], []
    for name in names:
        if not is_input(name):
            if args:
                raise MinreproError(f"{name} is a catalog case: arguments after -- are for a script")
            done.append(name)
            continue
        one = prepare(name, None, python, Invocation(args))
        take_env(one)
        done.append(str(one.path) if one else name)
        prepared += [one] if one else []
    return done, prepared


def is_input(name: str) -> bool:
    """A script or notebook path (not a catalog case id)."""
    return name.endswith((".py", ".ipynb")) or Path(name).is_file()
