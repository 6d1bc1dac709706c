"""The catalog: the manifest (`cases/catalog.toml`), its version sets, and static checks on case scripts."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from .errors import MinreproError

CASES_DIR = Path(__file__).with_name("cases")
MANIFEST = CASES_DIR / "catalog.toml"
OUTCOMES = ("fail", "pass", "unreproduced", "fail-other")  # fail-other: another failure comes first there
FAILING = ("fail", "fail-other")  # outcomes that declare the case fails on that set
DEVICES = ("cpu", "cuda")
LIBRARIES = frozenset({"torch", "bitsandbytes", "accelerate", "peft", "transformers"})
MAX_CODE_LINES = 30

REQUIRED = ("id", "script", "family", "device", "signature", "pinned", "newest", "fixed_in", "upstream")
OPTIONAL = ("owner", "seed_trace", "notes", "requires_cpu_flags", "requires_no_cuda", "patches")


@dataclass(frozen=True)
class VersionSet:
    name: str
    description: str
    requirements: tuple[Requirement, ...]

    def pins(self) -> dict[str, str]:
        """{distribution: exact version} for the set's ``==`` requirements."""
        return {r.name.lower(): next(iter(r.specifier)).version for r in self.requirements}


@dataclass(frozen=True)
class Case:
    id: str
    script: Path
    family: str
    device: str
    signature: str
    pinned: str
    newest: str
    fixed_in: tuple[str, ...]
    upstream: tuple[str, ...]
    owner: str | None = None
    seed_trace: Path | None = None
    notes: str = ""
    requires_cpu_flags: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()  # logical patch ids (`library/name`), in the order they stack
    requires_no_cuda: bool = False  # the bug needs a machine where bitsandbytes loads its CPU library

    def declared(self, set_name: str) -> str:
        """The outcome declared for a named version set."""
        return {"pinned": self.pinned, "newest": self.newest}[set_name]

    def failing_set(self) -> str:
        """The first version set on which the case fails (its script's PEP 723 pins are that set's)."""
        return next((s for s in ("pinned", "newest") if self.declared(s) == "fail"), "pinned")


@dataclass(frozen=True)
class Catalog:
    sets: dict[str, VersionSet]
    cases: tuple[Case, ...]
    path: Path = field(default=MANIFEST)

    def select(self, ids: Iterable[str]) -> tuple[Case, ...]:
        """The named cases in the order given (all when none), or a one-line error for unknown ids."""
        ids = list(ids)
        if not ids:
            return self.cases
        by_id = {case.id: case for case in self.cases}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise MinreproError(f"unknown case id: {', '.join(unknown)} (known: {', '.join(by_id)})")
        return tuple(by_id[i] for i in ids)

    def version_set(self, name: str) -> VersionSet:
        if name not in self.sets:
            raise MinreproError(f"unknown version set {name!r} (known: {', '.join(self.sets)})")
        return self.sets[name]

    def detect_set(self, installed: dict[str, str | None]) -> str | None:
        """The name of the version set the installed distributions match exactly, if any."""
        for name, vset in self.sets.items():
            if all(installed.get(dist) == version for dist, version in vset.pins().items()):
                return name
        return None


def load_catalog(path: Path | None = None) -> Catalog:
    """Parse and validate the manifest; any defect is a one-line MinreproError naming the entry."""
    path = Path(path) if path is not None else MANIFEST
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MinreproError(f"cannot read manifest {path}: {exc}") from None
    sets = {name: _version_set(name, raw) for name, raw in data.get("sets", {}).items()}
    for required_set in ("pinned", "newest"):
        if required_set not in sets:
            raise MinreproError(f"{path.name}: missing [sets.{required_set}]")
    cases = tuple(_case(path.parent, i, raw) for i, raw in enumerate(data.get("case", [])))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise MinreproError(f"{path.name}: duplicate case id {case.id!r}")
        seen.add(case.id)
    return Catalog(sets, cases, path)


def _version_set(name: str, raw: dict[str, Any]) -> VersionSet:
    try:
        reqs = tuple(Requirement(r) for r in raw["requirements"])
    except (KeyError, TypeError, InvalidRequirement) as exc:
        raise MinreproError(f"[sets.{name}]: bad or missing requirements ({exc})") from None
    for req in reqs:
        if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
            raise MinreproError(f"[sets.{name}]: {req} must pin one exact version with ==")
    return VersionSet(name, raw.get("description", ""), reqs)


def _case(root: Path, index: int, raw: dict[str, Any]) -> Case:
    label = f"case #{index + 1} ({raw.get('id', 'no id')})"
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise MinreproError(f"catalog.toml: {label} is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise MinreproError(f"catalog.toml: {label} has unknown field(s): {', '.join(unknown)}")
    for key in ("pinned", "newest"):
        if raw[key] not in OUTCOMES:
            raise MinreproError(f"catalog.toml: {label}: {key} = {raw[key]!r}, expected one of {OUTCOMES}")
    if raw["device"] not in DEVICES:
        raise MinreproError(f"catalog.toml: {label}: device = {raw['device']!r}, expected one of {DEVICES}")
    try:
        re.compile(raw["signature"])
    except re.error as exc:
        raise MinreproError(f"catalog.toml: {label}: signature is not a valid regex ({exc})") from None
    for spec in raw["fixed_in"]:
        _parse_pin(spec, label)
    script = root / raw["script"]
    if not script.is_file():
        raise MinreproError(f"catalog.toml: {label}: script {raw['script']} not found")
    seed = root / raw["seed_trace"] if raw.get("seed_trace") else None
    if seed is not None and not seed.is_file():
        raise MinreproError(f"catalog.toml: {label}: seed_trace {raw['seed_trace']} not found")
    return Case(
        id=raw["id"], script=script, family=raw["family"], device=raw["device"], signature=raw["signature"],
        pinned=raw["pinned"], newest=raw["newest"], fixed_in=tuple(raw["fixed_in"]),
        upstream=tuple(raw["upstream"]), owner=raw.get("owner"), seed_trace=seed, notes=raw.get("notes", ""),
        requires_cpu_flags=tuple(raw.get("requires_cpu_flags", ())), patches=tuple(raw.get("patches", ())),
        requires_no_cuda=bool(raw.get("requires_no_cuda", False)),
    )


def _parse_pin(spec: str, label: str) -> tuple[str, Version]:
    name, sep, version = spec.partition("==")
    try:
        if not sep:
            raise InvalidVersion(spec)
        return name.strip().lower(), Version(version)
    except InvalidVersion:
        raise MinreproError(f"catalog.toml: {label}: fixed_in entry {spec!r} is not NAME==VERSION") from None


def expected_outcome(case: Case, set_name: str | None, installed: dict[str, str | None]) -> str | None:
    """What the manifest says should happen with the installed versions (None: it says nothing).

    A named set uses its declared outcome. Otherwise a case with ``fixed_in`` is expected to pass once any
    listed fix is installed and to fail below all of them; other cases have no expectation."""
    if set_name is not None:
        return case.declared(set_name)
    if not case.fixed_in:
        return None
    for spec in case.fixed_in:
        name, fixed = _parse_pin(spec, case.id)
        current = installed.get(name)
        if current is not None and Version(current) >= fixed:
            return "pass"
    return "fail"


# --- static checks on the scripts --------------------------------------------------------------------

_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def script_metadata(source: str) -> dict[str, Any] | None:
    """The PEP 723 ``script`` block, parsed (the reference regex from the PEP)."""
    for match in _PEP723.finditer(source):
        if match["type"] == "script":
            content = "".join(
                line[2:] if line.startswith("# ") else line[1:]
                for line in match["content"].splitlines(keepends=True)
            )
            return tomllib.loads(content)
    return None


def code_lines(source: str) -> int:
    """Lines holding code: blank lines, comments, the module docstring and the PEP 723 block excluded."""
    skip: set[int] = set()
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
        if isinstance(first.value.value, str):
            skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    ignorable = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                 tokenize.ENCODING, tokenize.ENDMARKER}
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in ignorable:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - skip)


def module_imports(source: str) -> list[str]:
    """Every module the script imports, dotted, in order of first appearance."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


def imported_modules(source: str) -> set[str]:
    """Top-level names of every module the script imports."""
    return {name.split(".")[0] for name in module_imports(source)}


def check_case(case: Case, catalog: Catalog) -> list[str]:
    """Problems with a case script against the catalog's rules (empty when it complies)."""
    source = case.script.read_text(encoding="utf-8")
    problems = []
    count = code_lines(source)
    if count > MAX_CODE_LINES:
        problems.append(f"{count} code lines (limit {MAX_CODE_LINES})")
    foreign = sorted(imported_modules(source) - LIBRARIES - set(sys.stdlib_module_names))
    if foreign:
        problems.append(f"imports outside torch/HF libraries/stdlib: {', '.join(foreign)}")
    meta = script_metadata(source)
    if meta is None:
        return problems + ["no PEP 723 '# /// script' block"]
    problems += _check_pins(case, meta, catalog, imported_modules(source) & LIBRARIES)
    return problems


def script_pins(source: str) -> dict[str, str]:
    """{distribution: version} for the exact pins of a script's PEP 723 block (torch is never pinned)."""
    pins = {}
    for dep in (script_metadata(source) or {}).get("dependencies", []):
        req = Requirement(dep)
        if len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==":
            pins[req.name.lower()] = next(iter(req.specifier)).version
    return pins


def _check_pins(case: Case, meta: dict[str, Any], catalog: Catalog, libraries: set[str]) -> list[str]:
    """The block pins each HF library the script imports to the first set on which the case fails."""
    deps = {}
    for dep in meta.get("dependencies", []):
        req = Requirement(dep)
        deps[req.name.lower()] = str(req.specifier)
    failing = case.failing_set()
    pins = catalog.sets[failing].pins()
    problems = [f"imports {lib} but the script block does not list it" for lib in sorted(libraries - set(deps))]
    for dist, spec in deps.items():
        if dist in pins and spec != f"=={pins[dist]}":
            problems.append(f"script block pins {dist}{spec or ' (unpinned)'}, the {failing} set has =={pins[dist]}")
    return problems


def record_fixed_in(manifest: Path, case_id: str, fixed_in: list[str]) -> None:
    """Rewrite one case's `fixed_in` line in place (the rest of the file, comments included, is kept)."""
    text = manifest.read_text(encoding="utf-8")
    start = text.find(f'id = "{case_id}"')
    if start < 0:
        raise MinreproError(f"{manifest}: no case {case_id!r}")
    match = re.compile(r"^fixed_in = \[.*\]$", re.M).search(text, start)
    nxt = text.find("[[case]]", start)
    if match is None or (nxt >= 0 and match.start() > nxt):
        raise MinreproError(f"{manifest}: case {case_id!r} has no fixed_in line")
    line = "fixed_in = [" + ", ".join(f'"{f}"' for f in fixed_in) + "]"
    manifest.write_text(text[: match.start()] + line + text[match.end():], encoding="utf-8")
    load_catalog(manifest)  # still valid
