"""A user's script where a catalog case id is accepted (`check`, `run`, `bisect`, `report`): it becomes an ad-hoc
case whose expected failure is its own failure in the reference environment (the version set its PEP 723 pins
name, else `--python`), so the same judging, bisection and drafting apply to it as to a catalog case."""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from ..dirs import cache
from ..errors import MinreproError
from ..harness.runner import RunResult, run_script
from ..harness.signature import PATH_RE, is_key_lookup
from .manifest import LIBRARIES, MAX_CODE_LINES, USER_SCRIPT, Case, Catalog, script_metadata, script_pins
from ..reducers.source import code_lines, imported_modules


def is_script(arg: str) -> bool:
    return arg.endswith((".py", ".ipynb")) or Path(arg).is_file()


def read_source(path: Path) -> str:
    """The script's text, or a one-line error saying what the file is instead (binary, JSON, invalid Python)."""
    from ..inputs import read_python

    return read_python(path)


def pinned_set(catalog: Catalog, path: Path) -> str | None:
    """The version set whose pins the script's PEP 723 block lists exactly (for the libraries it pins)."""
    pins = script_pins(read_source(path))
    if not pins:
        return None
    for name, vset in catalog.sets.items():
        set_pins = vset.pins()
        if all(set_pins.get(dist) == version for dist, version in pins.items() if dist in set_pins) and any(
            dist in set_pins for dist in pins
        ):
            return name
    return None


def headline_regex(raw_headline: str) -> str:
    """The failure's final line as a regex: literal, with numbers free (a size may move between runs), paths free
    (a temp directory's name is new each run; the signature's own `PATH_RE`), and any key free for a missing
    key (its message is only the key)."""
    line = raw_headline.split("\n", 1)[0]
    exc_type = line.split(":", 1)[0]
    if is_key_lookup(exc_type):
        return re.escape(exc_type) + ": .+"
    literal = (re.sub(r"\d+", r"\\d+", re.escape(part)) for part in PATH_RE.split(line))
    return PATH_RE.pattern.join(literal)


def script_case(path: Path, reference: RunResult, reference_set: str | None) -> Case:
    """The script as a case: it is expected to fail as it did in the reference environment."""
    if reference.signature is None:
        raise MinreproError(f"{path} passes in its reference environment: there is no failure to check or bisect")
    owner = reference.signature.owner
    return Case(
        id=path.stem,
        script=path.resolve(),
        family=USER_SCRIPT,
        device="cpu",
        signature=headline_regex(reference.raw_headline),
        outcomes={reference_set: "fail"} if reference_set else {},
        fixed_in=(),
        upstream=(),
        owner=str(owner) if owner else None,
    )


@functools.cache
def reference_run(path: Path, python: str, timeout: float) -> RunResult:
    """The script's run in its reference env; once per process (`check --write-pins` reads what it loaded)."""
    return run_script(path, python=python, timeout=timeout)


def results_home(path: Path) -> Path:
    """Where `check SCRIPT --set ...` records its runs by default (and `report SCRIPT` reads them): the cache."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    return cache("results", f"{path.stem}-{digest}")


def static_problems(path: Path) -> list[str]:
    """The catalog's rules for a hand-over script: line limit, imports, a PEP 723 block that pins what it uses."""
    import sys

    source = read_source(path)
    problems = []
    if code_lines(source) > MAX_CODE_LINES:
        problems.append(f"{code_lines(source)} code lines (limit {MAX_CODE_LINES})")
    foreign = sorted(imported_modules(source) - LIBRARIES - set(sys.stdlib_module_names))
    if foreign:
        problems.append(f"imports outside torch/HF libraries/stdlib: {', '.join(foreign)}")
    meta = script_metadata(source)
    if meta is None:
        return [*problems, "no PEP 723 '# /// script' block (write one with --write-pins)"]
    pins = script_pins(source)
    unpinned = sorted((imported_modules(source) & LIBRARIES) - {"torch"} - set(pins))
    if unpinned:
        problems.append(f"imports {', '.join(unpinned)} without an exact pin")
    return problems


def with_pins(case: Case, versions: dict[str, str | None], loaded: tuple[str, ...] = ()) -> str:
    """The script's text with a PEP 723 block pinning, from `versions`, the libraries it imports or its run
    loaded."""
    from ..reduction.output import pep723

    source = read_source(case.script)
    body = re.sub(r"(?ms)^# /// script\n.*?^# ///\n", "", source, count=1)
    return pep723(body, versions, loaded) + body


def resolve(
    catalog: Catalog, names: list[str], python: str | None, timeout: float, note=lambda _: None
) -> list[tuple[Case, str | None]]:
    """(case, the python it was judged against) for each name: a catalog id as it is, a script as an ad-hoc case
    whose reference failure is its run in the env of its pinned set, else under `python` (or this interpreter)."""
    from ..envs.venvs import set_env
    from ..harness.runner import resolve_python

    out = []
    for name in names:
        if not is_script(name):
            out.append((catalog.select([name])[0], None))
            continue
        path = Path(name)
        read_source(path)
        where = pinned_set(catalog, path) if python is None else None
        reference = str(set_env(catalog, where, note=note)) if where else resolve_python(python)
        note(f"{path.name}: reference run under {reference}" + (f" (its pins are the {where} set)" if where else ""))
        out.append((script_case(path, reference_run(path.resolve(), reference, timeout), where), reference))
    return out
