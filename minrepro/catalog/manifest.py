"""The catalog manifest (`cases/catalog.toml`): one case per bug family, what it declares per version set,
and static checks on case scripts (line limit, imports, PEP 723 pins)."""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from ..envs.latest import LATEST, SNAPSHOT
from ..envs.sets import VersionSet, _version_set, detect_set, load_sets
from ..errors import MinreproError
from ..reducers.source import code_lines, imported_modules

CASES_DIR = Path(__file__).with_name("cases")
MANIFEST = CASES_DIR / "catalog.toml"
FAMILIES = "families.toml"  # beside the manifest: what each family is, for its generated page
OUTCOMES = ("fail", "pass", "unreproduced", "fail-other")  # fail-other: another failure comes first there
FAILING = ("fail", "fail-other")  # outcomes that declare the case fails on that set
DEVICES = ("cpu", "cuda")
LIBRARIES = frozenset({"torch", "bitsandbytes", "accelerate", "peft", "transformers"})
MAX_CODE_LINES = 30

REQUIRED = ("id", "script", "family", "device", "signature", "pinned", "newest", "fixed_in", "upstream")
OPTIONAL = ("owner", "seed_trace", "notes", "requires_cpu_flags", "requires_no_cuda", "requires_gpus", "patches")


USER_SCRIPT = "your script"  # the family of an ad-hoc case made from a user's script


@dataclass(frozen=True)
class Case:
    id: str
    script: Path
    family: str
    device: str
    signature: str
    # version set -> declared outcome (pinned and newest always; other sets optional). `latest` (no table in sets.toml:
    # the index's newest releases when it runs) may be declared where a case is known to behave otherwise there
    outcomes: dict[str, str]
    fixed_in: tuple[str, ...]
    upstream: tuple[str, ...]
    owner: str | None = None
    seed_trace: Path | None = None
    notes: str = ""
    requires_cpu_flags: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()  # logical patch ids (`library/name`), in the order they stack
    requires_no_cuda: str = ""  # why the bug needs a machine without CUDA (empty: it does not)
    requires_gpus: int = 0  # a cross-device bug between GPUs needs that many on one host

    @property
    def user_script(self) -> bool:
        """A script given on the command line, not a catalog case (see `catalog.targets.script_case`)."""
        return self.family == USER_SCRIPT

    @property
    def pinned(self) -> str:
        return self.outcomes["pinned"]

    @property
    def newest(self) -> str:
        return self.outcomes["newest"]

    def declared(self, set_name: str) -> str | None:
        """The outcome declared for a named version set (None: the case declares nothing for it)."""
        return self.outcomes.get(set_name)

    def failing_set(self) -> str:
        """The first version set on which the case fails (its script's PEP 723 pins are that set's)."""
        return next((s for s, o in self.outcomes.items() if o == "fail"), "pinned")


@dataclass(frozen=True)
class Family:
    """A bug family as its page tells it (`families.toml`): its cases come from the manifest."""

    id: str  # the letter (`A`, `A'`, `AB`): an alias kept in titles, the manifest and the tables
    title: str  # what fails, in a line
    summary: str  # what fails and why
    notes: str = ""  # what else is known: what was tried, where it does not show, leads
    slug: str = ""  # its name in file names and links: `slug` in families.toml, else its first case's id


@dataclass(frozen=True)
class Catalog:
    sets: dict[str, VersionSet]
    cases: tuple[Case, ...]
    path: Path = field(default=MANIFEST)
    controls: tuple[Control, ...] = ()  # scripts near a family's path without its bug: they pass, patched or not
    families: dict[str, Family] = field(default_factory=dict)  # by id, in the manifest's order of first case

    def family_ids(self) -> list[str]:
        """Every family the cases name, in the order the manifest first names it."""
        return list(dict.fromkeys(case.family for case in self.cases))

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
            resolved = " (`latest` is resolved from the index by the commands that take it)" if name == LATEST else ""
            raise MinreproError(f"unknown version set {name!r} (known: {', '.join(self.sets)}){resolved}")
        return self.sets[name]

    def with_set(self, vset: VersionSet, declared: dict[str, str] | None = None) -> Catalog:
        """This catalog with one more version set (`latest`, resolved when a command runs), each case declaring for it
        `declared[case id]` where given, else what the case declares for it in the manifest; controls pass there."""
        declared = declared or {}

        def case(c: Case) -> Case:
            outcome = declared.get(c.id, c.declared(vset.name))
            rest = {k: v for k, v in c.outcomes.items() if k != vset.name}
            return replace(c, outcomes={**rest, vset.name: outcome} if outcome else rest)

        controls = tuple(
            replace(c, case=replace(c.case, outcomes={**c.case.outcomes, vset.name: "pass"})) for c in self.controls
        )
        return replace(
            self, sets={**self.sets, vset.name: vset}, cases=tuple(case(c) for c in self.cases), controls=controls
        )

    def detect_set(self, installed: dict[str, str | None]) -> str | None:
        """The name of the version set the installed distributions match exactly, if any."""
        return detect_set(self.sets, installed)


def load_catalog(path: Path | None = None) -> Catalog:
    """Parse and validate the manifest; any defect is a one-line MinreproError naming the entry. The version
    sets come from `envs/sets.toml`, unless the manifest carries its own `[sets.*]` tables (a user's catalog)."""
    path = Path(path) if path is not None else MANIFEST
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MinreproError(f"cannot read manifest {path}: {exc}") from None
    if "sets" in data:
        sets = {name: _version_set(name, raw) for name, raw in data["sets"].items()}
        for required_set in ("pinned", "newest"):
            if required_set not in sets:
                raise MinreproError(f"{path.name}: missing [sets.{required_set}]")
    else:
        sets = load_sets()
    cases = tuple(_case(path.parent, i, raw, sets) for i, raw in enumerate(data.get("case", [])))
    controls = tuple(_control(path.parent, i, raw, sets) for i, raw in enumerate(data.get("control", [])))
    seen: set[str] = set()
    for case in cases + tuple(control.case for control in controls):
        if case.id in seen:
            raise MinreproError(f"{path.name}: duplicate case id {case.id!r}")
        seen.add(case.id)
    return Catalog(sets, cases, path, controls, _families(path.parent / FAMILIES, cases))


FAMILY_FIELDS = ("title", "summary", "notes", "slug")
FAMILY_FIELDS = ("title", "summary", "notes")


def _families(path: Path, cases: tuple[Case, ...]) -> dict[str, Family]:
    """`families.toml`: a `[family."ID"]` table per family the cases name (title and summary required). A user's
    catalog may have none: its families then have no page of their own."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")).get("family", {})
    except tomllib.TOMLDecodeError as exc:
        raise MinreproError(f"cannot read {path}: {exc}") from None
    named = list(dict.fromkeys(case.family for case in cases))
    unknown = [fid for fid in data if fid not in named]
    missing = [fid for fid in named if fid not in data]
    if unknown or missing:
        raise MinreproError(
            f"{path.name}: "
            + "; ".join(
                part
                for part in (
                    f"no case of family {', '.join(unknown)}" if unknown else "",
                    f"no entry for family {', '.join(missing)}" if missing else "",
                )
                if part
            )
        )
    families = {}
    for fid in named:
        raw = data[fid]
        unknown_fields = sorted(set(raw) - set(FAMILY_FIELDS))
        empty = [key for key in ("title", "summary") if not str(raw.get(key, "")).strip()]
        if unknown_fields or empty:
            raise MinreproError(
                f"{path.name}: family {fid}: unknown or empty field(s) {', '.join(unknown_fields + empty)}"
            )
        slug = raw.get("slug") or next(c.id for c in cases if c.family == fid)
        families[fid] = Family(
            fid, raw["title"].strip(), raw["summary"].strip(), raw.get("notes", "").strip(), slug.strip()
        )
    return families


CONTROL_FIELDS = ("id", "script", "device", "near", "notes", "emulate_absent")


@dataclass(frozen=True)
class Control:
    case: Case  # declared "pass" on every set, with a signature nothing matches
    near: tuple[str, ...]  # the patch ids whose path it shares (what it guards against)
    emulate_absent: tuple[str, ...] = ()  # CPU features it is also run without, where this CPU has them


def _control(root: Path, index: int, raw: dict[str, Any], sets: dict[str, VersionSet]) -> Control:
    """A `[[control]]` entry: a script declared to pass on every set, unpatched and with every patch (`patch prove`
    runs it on both sides: a pass the patches break is harm). `near` names the patches whose path it shares."""
    label = f"control #{index + 1} ({raw.get('id', 'no id')})"
    unknown = sorted(set(raw) - set(CONTROL_FIELDS))
    missing = [key for key in CONTROL_FIELDS[:4] if key not in raw]
    if unknown or missing:
        raise MinreproError(
            f"catalog.toml: {label}: "
            + (f"missing {', '.join(missing)}" if missing else f"unknown field(s) {', '.join(unknown)}")
        )
    raw = {
        **raw,
        "family": "control",
        "signature": "(?!)",
        "fixed_in": [],
        "upstream": [],
        **{name: "pass" for name in sets},
    }
    near, emulate = tuple(raw.pop("near")), tuple(raw.pop("emulate_absent", ()))
    return Control(_case(root, index, raw, sets), near, emulate)


def _case(root: Path, index: int, raw: dict[str, Any], sets: dict[str, VersionSet]) -> Case:
    label = f"case #{index + 1} ({raw.get('id', 'no id')})"
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise MinreproError(f"catalog.toml: {label} is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL) - set(sets) - {LATEST})
    if unknown:
        raise MinreproError(f"catalog.toml: {label} has unknown field(s): {', '.join(unknown)}")
    outcomes = {name: raw[name] for name in (*sets, LATEST) if name in raw}
    for key, value in outcomes.items():
        if value not in OUTCOMES:
            raise MinreproError(f"catalog.toml: {label}: {key} = {value!r}, expected one of {OUTCOMES}")
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
        id=raw["id"],
        script=script,
        family=raw["family"],
        device=raw["device"],
        signature=raw["signature"],
        outcomes=outcomes,
        fixed_in=tuple(raw["fixed_in"]),
        upstream=tuple(raw["upstream"]),
        owner=raw.get("owner"),
        seed_trace=seed,
        notes=raw.get("notes", ""),
        requires_cpu_flags=tuple(raw.get("requires_cpu_flags", ())),
        patches=tuple(raw.get("patches", ())),
        requires_no_cuda=_no_cuda(label, raw.get("requires_no_cuda", False)),
        requires_gpus=_gpus(label, raw),
    )


# what `requires_no_cuda = true` means: the H and J families need bitsandbytes' CPU library
NO_CUDA_BNB_CPU = "with CUDA, bitsandbytes loads its CUDA library, which has no AVX512-BF16 CPU path"


def _no_cuda(label: str, value: object) -> str:
    """`requires_no_cuda`: true (bitsandbytes' CPU library, the common reason), or a string saying why."""
    if isinstance(value, bool):
        return NO_CUDA_BNB_CPU if value else ""
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise MinreproError(f"catalog.toml: {label}: requires_no_cuda must be true, false or a reason, not {value!r}")


def _gpus(label: str, raw: dict[str, Any]) -> int:
    gpus = raw.get("requires_gpus", 0)
    if not isinstance(gpus, int) or gpus < 0 or (gpus and raw["device"] != "cuda"):
        raise MinreproError(f"catalog.toml: {label}: requires_gpus = {gpus!r}, expected a count on a cuda case")
    return gpus


def stacking_order(catalog: Catalog) -> list[str]:
    """Every patch id the cases use, in the order they stack: cases in manifest order, each case's own order."""
    return list(dict.fromkeys(pid for case in catalog.cases for pid in case.patches))


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
                line[2:] if line.startswith("# ") else line[1:] for line in match["content"].splitlines(keepends=True)
            )
            return tomllib.loads(content)
    return None


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
        return [*problems, "no PEP 723 '# /// script' block"]
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
    problems = [f"imports {lib} but the script block does not list it" for lib in sorted(libraries - set(deps))]
    if failing == LATEST and LATEST not in catalog.sets:
        return problems + _check_latest_pins(deps, catalog.sets[SNAPSHOT].pins())
    pins = catalog.sets[failing].pins()
    for dist, spec in deps.items():
        if dist in pins and spec != f"=={pins[dist]}":
            problems.append(f"script block pins {dist}{spec or ' (unpinned)'}, the {failing} set has =={pins[dist]}")
    return problems


def _check_latest_pins(deps: dict[str, str], snapshot: dict[str, str]) -> list[str]:
    """A case that first fails on `latest` pins the releases it failed on: none below the snapshot's, one above."""
    problems, newer = [], False
    for dist, pinned in snapshot.items():
        spec = deps.get(dist)
        if spec is None:
            continue
        if not spec.startswith("==") or Version(spec[2:]) < Version(pinned):
            problems.append(
                f"script block pins {dist}{spec or ' (unpinned)'}: a latest case pins a release >= {pinned}"
            )
        newer |= spec.startswith("==") and Version(spec[2:]) > Version(pinned)
    if not newer and not problems:
        problems.append(f"it first fails on {LATEST}, but its block pins no release newer than the {SNAPSHOT} set's")
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
    manifest.write_text(text[: match.start()] + line + text[match.end() :], encoding="utf-8")
    load_catalog(manifest)  # still valid
