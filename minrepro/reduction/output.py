"""What the reduced script looks like when it is handed over: laid out as people write Python (imports grouped,
blank lines around definitions), with a PEP 723 block pinning the bad environment's versions, and a header that
says where it came from, what it fails with, and what guarded the reduction."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable

from ..catalog.manifest import LIBRARIES
from ..reducers.source import code_lines, imported_modules
from . import triggers
from .results import Context, Results

SUPPORT_PINS = ("tokenizers",)  # pins that hold a set together (transformers 5.6.2 refuses newer tokenizers)


def layout(source: str) -> str:
    """ast.unparse's text with PEP 8's vertical layout: stdlib and other imports in groups, two blank lines
    around top-level definitions. Only blank lines change: the code is what was verified."""
    parts: list[str] = []
    previous = None
    for stmt in ast.parse(source).body:
        kind = _kind(stmt)
        if previous is not None:
            parts.append("\n\n\n" if "def" in (kind, previous) else "\n\n" if kind != previous else "\n")
        parts.append(ast.unparse(stmt))
        previous = kind
    return "".join(parts) + "\n"


def _kind(stmt: ast.stmt) -> str:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
        top = names[0].split(".")[0]
        return "import-stdlib" if top in sys.stdlib_module_names else "import-other"
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return "def"
    return "code"


def pep723(source: str, versions: dict[str, str | None], loaded: Iterable[str] = ()) -> str:
    """A PEP 723 block pinning, from the bad environment, each library the script imports or its run loaded
    (`loaded`: BitsAndBytesConfig needs bitsandbytes without an import of it; torch unpinned: its build is the
    machine's) plus the support pins that hold those versions together."""
    needed = imported_modules(source) | set(loaded)
    used = sorted(needed & (LIBRARIES - {"torch"}))
    deps = ["torch"] if "torch" in needed or used else []
    deps += [f"{name}=={versions[name]}" for name in used if versions.get(name)]
    if "transformers" in used:
        deps += [f"{name}=={versions[name]}" for name in SUPPORT_PINS if versions.get(name)]
    listed = ", ".join(f'"{d}"' for d in deps)
    return f'# /// script\n# requires-python = ">=3.10"\n# dependencies = [{listed}]\n# ///\n'


def needs(source: str) -> str:
    """Header lines for what the script needs besides the libraries: a tokenizer or processor it still loads. The
    scale-down replaces each tokenizer call by what it returned where the failure does not depend on it; where it
    does, the load stays, and so does the need for its files (or the Hub)."""
    loads = [
        ast.unparse(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "from_pretrained"
        and any(word in ast.unparse(node.func.value) for word in ("Tokenizer", "Processor"))
    ]
    return "".join(f"# Needs its tokenizer's files (the failure depends on the tokenizer): {call}\n" for call in loads)


def write(ctx: Context, done: Results, verified: bool) -> str:
    """The output: PEP 723 pins, a header that says what it fails with, what guards it and what the verification
    saw, then the reduced program (`ctx.best`: where an interrupted reduction stopped)."""
    body = triggers.annotate(layout(ctx.best), list(done.found))
    status = "" if verified else "INTERRUPTED, NOT VERIFIED: "
    prepared, owner = ctx.opts.prepared, done.owner
    lines = [
        f"# {status}reduced by minrepro from {prepared.name if prepared else ctx.script.name}: "
        f"{code_lines(ctx.source)} -> {code_lines(body)} code lines.",
        *(f"# {line}" for line in (prepared.header(body) if prepared else ())),
        f"# Fails with: {done.headline}" + (f"  (in {owner})" if owner else ""),
        f"# Guard: {done.chosen.why}",
        *needs(body).splitlines(),
    ]
    if verified and done.good_said:
        lines.append(f"# Where the bug is fixed it {done.good_said}.")
    if done.ending:
        lines.append(f"# Not reduced: {done.ending}.")
    if verified and done.searching_cut:
        lines.append(
            f"# The search stopped at its time budget (--max-seconds {ctx.opts.max_seconds:g}): maybe not minimal."
        )
    versions = done.versions
    header = (pep723(body, versions, done.loaded) if versions else "") + "\n".join(lines) + "\n"
    text = header + body
    ctx.out.write_text(text, encoding="utf-8")
    return text
