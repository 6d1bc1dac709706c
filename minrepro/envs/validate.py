"""Validating a candidate upstream change before it is submitted: which catalog families it fixes, which it
breaks, what the recorded Gemma 4 scenarios do with it, and whether the library's own tests still pass.

A candidate is `LIB=SPEC`: a unified diff (applied to the installed release, no fuzz), a source checkout (pip
installs it in place of the release), or `GITDIR@REF`, a ref of a fetched repository (its tree at REF, installed
the same way). For each version set, a clean env and a candidate env (tool-made, in the cache) run the same
cases; a case is *fixed* when it fails before and passes after, *newly failing* when it passed before and fails
after, *changed* when it fails both times but differently.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from collections.abc import Callable

from ..catalog.manifest import Case, Catalog
from ..catalog.run import CaseResult, CaseRuns, run_cases
from ..dirs import cache
from ..errors import MinreproError
from ..harness.probe import probe
from ..harness.signature import Signature
from ..reducers.source import imported_modules
from .patching import Patch, apply_patches
from .venvs import create_env, read_marker, set_env, wheelhouse_from_env, write_marker

LIBRARIES = ("accelerate", "peft", "bitsandbytes", "transformers")


@dataclass(frozen=True)
class Candidate:
    library: str
    kind: str  # "diff" | "checkout" | "ref"
    source: Path
    ref: str | None = None

    @property
    def label(self) -> str:
        return f"{self.library}={self.source}" + (f"@{self.ref}" if self.ref else "")


def parse_with(spec: str) -> Candidate:
    """`LIB=path.diff`, `LIB=CHECKOUT` or `LIB=GITDIR@REF`, or a one-line error."""
    library, sep, where = spec.partition("=")
    if not sep or library not in LIBRARIES:
        raise MinreproError(f"--with takes LIB=SPEC with LIB one of {', '.join(LIBRARIES)}: got {spec!r}")
    path, at, ref = where.rpartition("@") if "@" in where else (where, "", "")
    path = Path(path).expanduser()
    if at:
        if not (path / "HEAD").is_file() and not (path / ".git").exists():
            raise MinreproError(f"{path} is not a git repository (for {library}@{ref})")
        return Candidate(library, "ref", path.absolute(), ref)
    if path.is_file() and path.suffix in (".diff", ".patch"):
        return Candidate(library, "diff", path.absolute())
    if path.is_dir() and ((path / "pyproject.toml").is_file() or (path / "setup.py").is_file()):
        return Candidate(library, "checkout", path.absolute())
    raise MinreproError(f"{where} is neither a .diff file, a source checkout, nor GITDIR@REF")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    git_dir = repo if (repo / "HEAD").is_file() else repo / ".git"
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True)


def materialize(candidate: Candidate, scratch: Path) -> Path:
    """A directory pip can install: the checkout itself, or the tree at the ref extracted from the repository."""
    if candidate.kind == "checkout":
        return candidate.source
    dest = scratch / f"{candidate.library}-{candidate.ref}"
    if not dest.is_dir():
        archive = _git(candidate.source, "archive", "--format=tar", candidate.ref)
        if archive.returncode != 0:
            raise MinreproError(f"no {candidate.ref} in {candidate.source}: {archive.stderr.decode().strip()[-200:]}")
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest, filter="data")
    return dest


def install(candidate: Candidate, env: Path, scratch: Path) -> None:
    """Put the candidate into a tool-made env, recorded in its marker."""
    if candidate.kind == "diff":
        patch = Patch(candidate.source, candidate.library, candidate.source.stem, "candidate", "", "", ())
        foreign = [f for f in patch.files if not f.startswith(candidate.library + "/")]
        if foreign:
            raise MinreproError(
                f"{candidate.source.name} touches files outside {candidate.library}: {', '.join(foreign)}"
            )
        apply_patches([patch], env)
    else:
        tree = materialize(candidate, scratch)
        python = env / "bin" / "python"
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", str(tree)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise MinreproError(f"cannot install {candidate.label}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    marker = read_marker(env)
    marker.setdefault("candidates", []).append(candidate.label)
    write_marker(env, marker)


def touched_files(candidate: Candidate) -> list[str]:
    """The library's files the candidate changes (site-packages layout): a diff's own, or those REF's own commit
    changes (a merged PR's merge commit, a branch tip); nothing is known for a plain checkout."""
    if candidate.kind == "diff":
        return list(Patch(candidate.source, candidate.library, candidate.source.stem, "", "", "", ()).files)
    if candidate.kind != "ref":
        return []
    diff = _git(candidate.source, "diff", "--name-only", f"{candidate.ref}^", candidate.ref)
    if diff.returncode != 0:
        return []
    names = (n.removeprefix("src/") for n in diff.stdout.decode().split() if n.endswith(".py"))
    return sorted(n for n in names if n.startswith(candidate.library + "/"))


def tests_for(tree: Path, touched: list[str]) -> list[str]:
    """The test files of a touched module, by the libraries' naming: `x.py` -> tests/test_x.py, and for
    `pkg/utils/modeling.py` also tests/test_modeling_utils.py (accelerate's) and tests/utils/test_modeling.py."""
    found = []
    for path in touched:
        stem, parent = Path(path).stem, Path(path).parent.name
        for name in (f"tests/test_{stem}.py", f"tests/test_{stem}_{parent}.py", f"tests/{parent}/test_{stem}.py"):
            if (tree / name).is_file():
                found.append(name)
    return list(dict.fromkeys(found))


def affected_cases(catalog: Catalog, libraries: set[str]) -> list[Case]:
    """Cases whose failing path the candidate's library can reach: the script imports it, its patches or its owner
    belong to it. The catalog's controls too: one that passed before and fails with the candidate is harm."""
    out = []
    for case in catalog.cases + tuple(control.case for control in catalog.controls):
        imports = imported_modules(case.script.read_text(encoding="utf-8"))
        owners = {case.owner.split(".")[0]} if case.owner else set()
        patched = {p.split("/")[0] for p in case.patches}
        if libraries & (imports | owners | patched) or ("transformers" in imports and libraries & {"transformers"}):
            out.append(case)
    return out


def status(before: CaseResult, after: CaseResult) -> str:
    if before.observed == "skipped" or after.observed == "skipped":
        return "skipped"
    failed_before, failed_after = before.observed != "pass", after.observed != "pass"
    if failed_before and not failed_after:
        return "fixed"
    if not failed_before and failed_after:
        return "newly failing"
    if failed_before and failed_after:
        return "still fails" if _same_failure(before, after) else "changed"
    return "passes"


def _same_failure(before: CaseResult, after: CaseResult) -> bool:
    """By signature (type, normalized message, library frames, causes), not by the final line: T's garbage from
    uninitialized memory reads `max error 0.413` in one env and `1.87e+27` in another, a comment-only diff included."""
    if before.signature and after.signature:
        return Signature.from_dict(before.signature) == Signature.from_dict(after.signature)
    return before.headline == after.headline


@dataclass
class SetReport:
    set: str
    candidate_env: str
    touched: list[str]
    rows: list[dict] = field(default_factory=list)
    scenarios: list[dict] = field(default_factory=list)
    upstream: dict | None = None


def candidate_env(catalog: Catalog, set_name: str, candidates: list[Candidate], log: Callable[[str], None]) -> Path:
    """A fresh tool-made env of the set with the candidates installed (rebuilt whenever they change)."""
    key = hashlib.sha1("\n".join([set_name, *(c.label for c in candidates), *_stamps(candidates)]).encode()).hexdigest()
    env = cache("envs", "validate", f"{set_name}-{key[:12]}")
    if (read_marker(env) or {}).get("candidates") == [c.label for c in candidates]:
        return env
    log(f"{set_name}: making the candidate environment {env}")
    import shutil

    if env.exists():
        shutil.rmtree(env)
    create_env(
        env,
        [str(r) for r in catalog.version_set(set_name).requirements],
        wheelhouse_from_env(),
        label=f"{set_name} + candidate",
    )
    for candidate in candidates:
        install(candidate, env, cache("validate-sources"))
    return env


def _stamps(candidates: list[Candidate]) -> list[str]:
    """What identifies a candidate's content: a diff's bytes, a checkout's mtime-free listing, a ref's commit."""
    out = []
    for c in candidates:
        if c.kind == "diff":
            out.append(hashlib.sha1(c.source.read_bytes()).hexdigest())
        elif c.kind == "ref":
            out.append(_git(c.source, "rev-parse", c.ref).stdout.decode().strip())
        else:
            out.append(str(c.source))  # a checkout changes under us: rebuilt only when asked (--fresh)
    return out


@dataclass(frozen=True)
class AlsoRun:
    """What a validation runs beside the affected cases: the library's own tests for the touched files
    (`upstream`), the tiny scenario presets of the affected families (`scenarios`)."""

    upstream: bool
    scenarios: bool


def validate(
    catalog: Catalog, candidates: list[Candidate], sets: list[str], runs: CaseRuns, also: AlsoRun
) -> list[SetReport]:
    """The affected cases of each set before and after the candidates, in the fork server whatever `runs.warm`
    says."""
    timeout, log, warm = runs.timeout, runs.progress, replace(runs, warm=True)
    libraries = {c.library for c in candidates}
    cases = affected_cases(catalog, libraries)
    reports = []
    for set_name in sets:
        clean = probe(str(set_env(catalog, set_name, note=log)))
        env = candidate_env(catalog, set_name, candidates, log)
        patched = probe(str(env / "bin" / "python"))
        log(f"{set_name}: {len(cases)} cases before and after")
        before = run_cases(cases, clean, set_name, warm)
        after = run_cases(cases, patched, set_name, warm)
        touched = [f for c in candidates for f in touched_files(c)]
        report = SetReport(set_name, str(env), touched)
        for b, a in zip(before, after, strict=False):
            report.rows.append(
                {
                    "case": b.case,
                    "family": b.family,
                    "before": b.observed,
                    "before_headline": b.headline,
                    "after": a.observed,
                    "after_headline": a.headline,
                    "status": status(b, a),
                }
            )
        if also.scenarios:
            report.scenarios = _scenarios(cases, clean, patched, timeout, log)
        if also.upstream:
            report.upstream = _upstream(candidates, clean.python, patched.python, touched, log)
        reports.append(report)
    return reports


def _scenarios(cases: list[Case], clean, patched, timeout: float, log: Callable[[str], None]) -> list[dict]:
    """The tiny Gemma 4 presets of the affected families, on the device at hand, before and after."""
    from ..scenarios.presets import SEED_REPORTS, presets
    from ..scenarios.table import PresetEnv, PresetsAt, checkpoint_namespace, scenario_table

    device = "cuda" if clean.cuda else "cpu"
    ids = {case.id for case in cases}
    names = [n for n in presets(device) if SEED_REPORTS[n].case in ids]
    rows = []
    for label, env in (("before", clean), ("after", patched)):
        log(f"scenarios ({label}, tiny, {device}): {', '.join(names)}")
        marker = read_marker(Path(env.python).parent.parent) or {}
        patches = marker.get("patches", [])
        table = scenario_table(
            PresetsAt(names, "tiny", device),
            PresetEnv(env.python, timeout, checkpoint_namespace(env.versions, patches), patches),
            lambda _: None,
        )
        rows += [{**row, "when": label} for row in table]
    return rows


def _upstream(
    candidates: list[Candidate], clean_python: str, patched_python: str, touched: list[str], log: Callable[[str], None]
) -> dict:
    """The library's own tests for the touched files, from the candidate's own tree (a ref or a checkout)."""
    from .upstream import SELECTIONS, TEST_REQUIREMENTS, PytestConditions, new_failures, run_tests
    from .venvs import env_of, pip_install

    source = next((c for c in candidates if c.kind in ("ref", "checkout")), None)
    if source is None:
        return {"skipped": "a diff carries no tests: give the library as a checkout or GITDIR@REF for its tests"}
    tree = materialize(source, cache("validate-sources"))
    selection = tests_for(tree, touched) or SELECTIONS.get(source.library, [])
    (tree / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    runs = {}
    for label, python in (("before", clean_python), ("after", patched_python)):
        env = env_of(python)
        pip_install(env, TEST_REQUIREMENTS.get(source.library, ["pytest"]), wheelhouse_from_env())
        log(f"upstream tests ({label}): {' '.join(selection)}")
        runs[label] = run_tests(
            env, tree, selection, cache("validate-junit") / f"{source.library}-{label}.xml", PytestConditions(3600)
        )
    # The candidate's own tests may import what only the candidate has: if they cannot run against the release
    # at all, there is no "before" to compare with, and every failure after the change counts.
    comparable = runs["before"].count("passed") > 0
    fresh = (
        new_failures(runs["before"], runs["after"])
        if comparable
        else sorted(t for t, o in runs["after"].outcomes.items() if o == "failed")
    )
    return {
        "selection": selection,
        "new_failures": fresh,
        "before_comparable": comparable,
        **{
            k: {"passed": v.count("passed"), "failed": v.count("failed"), "skipped": v.count("skipped")}
            for k, v in runs.items()
        },
    }


def format_report(candidates: list[Candidate], reports: list[SetReport]) -> str:
    lines = [f"candidate: {', '.join(c.label for c in candidates)}", ""]
    sets = [r.set for r in reports]
    by_case: dict[str, dict[str, dict]] = {}
    for report in reports:
        for row in report.rows:
            by_case.setdefault(row["case"], {})[report.set] = row
    lines += ["| case | family | " + " | ".join(sets) + " |", "|---|---|" + "---|" * len(sets)]
    for case, cells in by_case.items():
        family = next(iter(cells.values()))["family"]
        lines.append(f"| {case} | {family} | " + " | ".join(_cell(cells.get(s)) for s in sets) + " |")
    for report in reports:
        if report.scenarios:
            lines += ["", f"scenarios on {report.set} (tiny): | preset | before | after |", "|---|---|---|"]
            after = {r["preset"]: r for r in report.scenarios if r["when"] == "after"}
            for row in (r for r in report.scenarios if r["when"] == "before"):
                shown = [
                    ("pass" if x["outcome"] == "pass" else x["headline"][:50]) for x in (row, after[row["preset"]])
                ]
                lines.append(f"| {row['preset']} | {shown[0]} | {shown[1]} |")
        if report.upstream:
            up = report.upstream
            lines.append("")
            before = (
                f"before {up['before']['passed']} passed / {up['before']['failed']} failed"
                if up.get("before_comparable")
                else "before: they do not run against the release (they test what only the candidate has)"
            )
            lines.append(
                f"upstream tests on {report.set}: "
                + (
                    up["skipped"]
                    if "skipped" in up
                    else f"{' '.join(up['selection'])}: {before}; after {up['after']['passed']} passed / "
                    f"{up['after']['failed']} failed / {up['after']['skipped']} skipped; new failures: "
                    f"{len(up['new_failures'])}" + "".join(f"\n  {t}" for t in up["new_failures"])
                )
            )
    lines += ["", verdict(reports)]
    return "\n".join(lines)


def _cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row["status"] in ("fixed", "passes", "skipped"):
        return row["status"]
    detail = row["after_headline"][:50]
    return f"{row['status']}: {detail}" if detail else row["status"]


def verdict(reports: list[SetReport]) -> str:
    fixed = sorted({f"{r['case']} ({rep.set})" for rep in reports for r in rep.rows if r["status"] == "fixed"})
    broken = sorted({f"{r['case']} ({rep.set})" for rep in reports for r in rep.rows if r["status"] == "newly failing"})
    changed = sorted({f"{r['case']} ({rep.set})" for rep in reports for r in rep.rows if r["status"] == "changed"})
    upstream = sum(len(rep.upstream.get("new_failures", [])) for rep in reports if rep.upstream)
    word = "BREAKS" if broken or upstream else "fixes" if fixed else "changes nothing in"
    return (
        f"verdict: {word} the catalog: fixes {len(fixed)}"
        + (f" ({', '.join(fixed)})" if fixed else "")
        + f", newly failing {len(broken)}"
        + (f" ({', '.join(broken)})" if broken else "")
        + f", failing differently {len(changed)}"
        + (f" ({', '.join(changed)})" if changed else "")
        + (
            "; upstream tests: "
            + (
                f"{upstream} new failure(s)"
                if any(rep.upstream for rep in reports)
                else "not run (--upstream-tests runs them)"
            )
        )
    )


def as_json(candidates: list[Candidate], reports: list[SetReport]) -> dict:
    return {
        "candidates": [c.label for c in candidates],
        "sets": [asdict(r) for r in reports],
        "verdict": verdict(reports),
        "python": sys.version.split()[0],
    }
