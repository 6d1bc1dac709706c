"""A notebook as a plain script: its code cells in order, outputs ignored, IPython's syntax turned into Python or
dropped with a note, and a one-line error naming the cell for what cannot be turned (a magic that changes what
runs, an unknown one, a cell that is not Python)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MinreproError

INSTALLERS = {"pip", "conda", "mamba", "micromamba", "uv"}  # `%pip install`, `!pip install`: the env is --python's
# line magics that only show or configure display: dropped
DISPLAY = {
    "matplotlib",
    "config",
    "autosave",
    "precision",
    "xmode",
    "pdb",
    "colors",
    "who",
    "whos",
    "who_ls",
    "pwd",
    "history",
    "lsmagic",
    "magic",
    "pprint",
    "autoreload",
    "page",
    "pinfo",
    "pinfo2",
    "psearch",
    "tb",
    "notebook",
    "debug",
    "quickref",
    "doctest_mode",
    "automagic",
    "autocall",
    "ls",
    "dirs",
    "env",
}
# line magics whose argument is code that runs (once here: the timing is not the failure)
TIMED = {"time", "timeit", "prun"}
# line magics that change what runs: another file, an extension, the working directory, the namespace
CHANGES = {
    "run",
    "load_ext",
    "reload_ext",
    "unload_ext",
    "load",
    "cd",
    "pylab",
    "reset",
    "reset_selective",
    "store",
    "sx",
    "system",
    "alias",
    "unalias",
    "macro",
    "edit",
    "recall",
    "rerun",
    "bookmark",
    "aimport",
    "sc",
    "pushd",
    "popd",
    "capture",
    "writefile",
    "bash",
    "sh",
    "script",
}
CELL_PASS = {"time", "timeit", "capture", "prun"}  # cell magics that run the cell's code as it is
CELL_DISPLAY = {"html", "markdown", "latex", "svg", "javascript", "js"}  # cell magics that only show something
_TIMEIT_OPTIONS = re.compile(r"^(?:-[nrp]\s*\d+\s+|-[qotc]\s+)*")
_ENV = re.compile(r"^(?:env|set_env)\s+([A-Za-z_]\w*)(?:\s*=\s*|\s+)(.*)$")


@dataclass
class Converted:
    source: str
    dropped: list[str] = field(default_factory=list)  # "`!pip install x` (an install)", ...
    cells: int = 0  # code cells taken
    sets_env: bool = False  # `%env` became `os.environ[...] = ...`: the script needs `import os`
    uses_display: bool = False  # Jupyter's `display()` with nothing defining it: the script gets `display = print`


def read_notebook(path: Path) -> list[tuple[int, str]]:
    """(1-based position among all cells, source) of each code cell, in order; a one-line error for a file nbformat
    cannot read."""
    try:
        import nbformat
    except ImportError:
        raise MinreproError("reading a notebook needs nbformat: pip install nbformat") from None
    try:
        notebook = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # nbformat raises JSON, schema and version errors of its own kinds
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MinreproError(f"{path} is not a readable notebook: {first[:160]}") from None
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        raise MinreproError(f"{path} is not a readable notebook: it has no list of cells")
    return [(i, "".join(c.get("source", ""))) for i, c in enumerate(cells, 1) if c.get("cell_type") == "code"]


def convert(cells: list[tuple[int, str]], name: str) -> Converted:
    """The code cells as one script (each cell's lines in order, a `# cell N` comment before each)."""
    out = Converted("")
    parts = []
    for number, text in cells:
        lines = _cell_lines(number, text, out)
        if lines is None:
            continue
        out.cells += 1
        parts.append(f"# cell {number}\n" + "\n".join(lines).rstrip() + "\n")
    out.source = "\n".join(parts)
    _check_python(out.source, name)
    tree = ast.parse(out.source)
    if _reads_unbound(tree, "get_ipython"):
        cell = _cell_of(out.source, _first_use(tree, "get_ipython"))
        raise MinreproError(f"{name}: cell {cell} calls get_ipython(), which plain Python does not have")
    out.uses_display = _reads_unbound(tree, "display")
    return out


def _cell_lines(number: int, text: str, out: Converted) -> list[str] | None:
    """The cell's lines as Python, or None for a cell dropped whole (a display-only cell magic)."""
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic in CELL_DISPLAY:
            out.dropped.append(f"`{first}` cell {number} (display only)")
            return None
        if magic not in CELL_PASS:
            raise MinreproError(
                f"cell {number}: the cell magic `%%{magic}` runs something other than the cell's "
                "Python; minrepro does not reduce it (make the cell plain Python)"
            )
        if magic == "timeit":
            out.dropped.append(f"`{first}` (the cell runs once)")
        lines = lines[1:]
    return [_line(number, line, out) for line in lines]


def _line(number: int, line: str, out: Converted) -> str:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if re.match(r"^[A-Za-z_][\w.]*\s*=\s*[!%]", stripped):
        raise MinreproError(
            f"cell {number}: `{stripped[:60]}` assigns what a shell command or magic prints; "
            "minrepro does not reduce it (assign the value in Python)"
        )
    if stripped.startswith("!"):
        command = stripped[1:].strip()
        installs = (command.split() or [""])[0] in INSTALLERS or command.startswith(("python -m pip", "python3 -m pip"))
        kind = "an install" if installs else "a shell command"
        return _dropped(indent, f"`{stripped[:80]}` ({kind})", out)
    if not stripped.startswith("%") or stripped.startswith("%%"):
        return line
    magic, _, rest = stripped[1:].partition(" ")
    rest = rest.strip()
    if magic in INSTALLERS:
        return _dropped(indent, f"`{stripped[:80]}` (an install)", out)
    if magic in ("env", "set_env") and (found := _ENV.match(f"{magic} {rest}")):
        out.sets_env = True
        return f"{indent}os.environ[{found[1]!r}] = {found[2].strip()!r}"
    if magic in DISPLAY:
        return _dropped(indent, f"`{stripped[:80]}` (display)", out)
    if magic in TIMED:
        code = _TIMEIT_OPTIONS.sub("", rest) if magic == "timeit" else rest
        return f"{indent}{code}" if code else _dropped(indent, f"`{stripped[:80]}`", out)
    if magic in CHANGES:
        raise MinreproError(
            f"cell {number}: `%{magic}` changes what runs; minrepro does not reduce it (put what it "
            "does into the cell as Python)"
        )
    raise MinreproError(f"cell {number}: unknown magic `%{magic}` (minrepro reads code cells as Python)")


def _dropped(indent: str, what: str, out: Converted) -> str:
    out.dropped.append(what)
    return f"{indent}pass" if indent else ""


def _check_python(source: str, name: str) -> None:
    try:
        compile(source, name, "exec")
    except SyntaxError as exc:
        cell = _cell_of(source, exc.lineno or 1)
        raise MinreproError(f"{name}: cell {cell} is not Python once its magics are read: {exc.msg}") from None


def _cell_of(source: str, lineno: int) -> str:
    marks = [
        m
        for m in re.finditer(r"^# cell (\d+)$", source, re.MULTILINE)
        if source.count("\n", 0, m.start()) + 1 <= lineno
    ]
    return marks[-1][1] if marks else "?"


def _reads_unbound(tree: ast.Module, name: str) -> bool:
    loads = any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(tree))
    bound = any(
        (isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))
        or (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
        or (isinstance(n, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in n.names))
        for n in ast.walk(tree)
    )
    return loads and not bound


def _first_use(tree: ast.Module, name: str) -> int:
    return min(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)
