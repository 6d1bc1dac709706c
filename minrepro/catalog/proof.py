"""Proving the patches: in one run, each patched case passes in a patched environment while its unpatched
twin (same set, no patches) still fails as declared; cases whose fix takes several patches also get the
chain of outcomes as the patches are added one by one (fixing one bug may expose the next)."""

from __future__ import annotations

import datetime as _dt
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from minrepro.envs import patching
from minrepro.errors import MinreproError
from minrepro.catalog.manifest import FAILING, Case, Catalog, Control
from minrepro.envs.venvs import create_env, env_python, read_marker
from minrepro.harness.probe import Environment, probe
from minrepro.catalog.run import check_set, observe, skip_reason
from minrepro.harness.runner import run_script


@dataclass
class ProofRow:
    case: str
    family: str
    patches: list[str]  # the variants applied for this set
    declared: str  # the manifest's unpatched outcome for this set
    unpatched: str  # observed without patches
    unpatched_headline: str
    expected_patched: str  # "pass" when every patch of the case has a variant for this set
    patched: str  # observed with every patch applied
    patched_headline: str
    verdict: str  # "proved" | "upstream-fixed" | "no patch for this release" | "differs" | "skipped"
    chain: list[dict[str, str]] = field(default_factory=list)
    reason: str = ""
    # where the case's precondition is absent here (a CPU flag, the device): unpatched -> patched outcome, and
    # whether the patches did harm ("harm": a pass they turn into a failure); "" where the case ran as declared
    no_harm: str = ""
    # where the precondition is a CPU feature this machine has and minrepro can emulate away
    # (`EMULABLE_ABSENT`): the same comparison with the feature emulated absent
    no_harm_emulated: str = ""


# CPU features the bootstrap can make a library believe absent (`MINREPRO_EMULATE_ABSENT`, see _bootstrap.py)
EMULABLE_ABSENT = ("avx512_bf16",)


NOT_EMULATED = "not emulated"  # the emulation was asked for and did not take effect: the run proves nothing


@dataclass(frozen=True)
class SetEnvs:
    """A version set's two environments: `clean` without patches, `patched` where they are applied."""

    set_name: str
    clean: Path
    patched: Path


@dataclass(frozen=True)
class Sides:
    """The environments a proof compares, as probed: without (`clean`) and with (`patched`) the patches."""

    clean: Environment
    patched: Environment


@dataclass(frozen=True)
class ProofRuns:
    """How a proof runs its cases: each run's timeout, where progress goes, how many runs at a time."""

    timeout: float
    log: Callable[[str], None]
    jobs: int = 1


def _outcome(case: Case, env: Environment, timeout: float, absent: tuple[str, ...] = ()) -> tuple[str, str]:
    emulate = {"MINREPRO_EMULATE_ABSENT": ",".join(absent)} if absent else None
    run = run_script(case.script, python=env.python, timeout=timeout, isolated=True, env=emulate)
    observed = NOT_EMULATED if set(absent) - set(run.emulated_absent) else observe(case, run)[0]
    return observed, run.raw_headline.split("\n", 1)[0]


def _passes(observed: str) -> bool:
    return observed == "pass"


def _fails(observed: str) -> bool:
    return observed in FAILING


def prepare(
    catalog: Catalog, set_name: str, envs: Path, wheelhouse: Path | None, log: Callable[[str], None]
) -> SetEnvs:
    """The clean and the patched environment for a set (created once, reused; the patched one reset)."""
    requirements = [str(r) for r in catalog.sets[set_name].requirements]
    clean = envs / set_name
    patched = envs / f"{set_name}-patched"
    if read_marker(patched) is not None:
        try:
            patching.revert_patches(patched)
        except MinreproError as exc:  # it cannot be reset in place; the env is the tool's own: rebuild it
            log(f"  {exc}: rebuilding it")
            shutil.rmtree(patched)
    for env, label in ((clean, "unpatched"), (patched, "patched")):
        log(f"environment {env} ({label})")
        create_env(env, requirements, wheelhouse, label=f"{set_name} {label}")
    return SetEnvs(set_name, clean, patched)


def _outcomes(
    cases: list[Case], env: Environment, timeout: float, jobs: int, emulate: bool = False
) -> list[tuple[str, str]]:
    """Each case's outcome in `env`, `jobs` cold runs at a time (each case is its own process: the pinned proof
    ran them one by one and did not finish in 570 s on the H100); `emulate`: with its emulable CPU features
    emulated absent."""
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return list(pool.map(lambda case: _outcome(case, env, timeout, _emulable(case) if emulate else ()), cases))


def _emulable(case: Case) -> tuple[str, ...]:
    return tuple(flag for flag in case.requires_cpu_flags if flag in EMULABLE_ABSENT)


def prove(
    catalog: Catalog,
    cases: tuple[Case, ...],
    envs: SetEnvs,
    runs: ProofRuns,
    choose: Callable[[list[str], dict[str, str | None]], list[patching.Patch]] = patching.select,
) -> dict[str, Any]:
    """`choose` picks the variants of a case's patches for the installed versions (by default the one whose
    `Applies-to` names them; `minrepro drift` carries the snapshot's forward where they still apply)."""
    set_name, patched, timeout, log = envs.set_name, envs.patched, runs.timeout, runs.log
    clean_env, patched_env = probe(str(env_python(envs.clean))), probe(str(env_python(patched)))
    sides = Sides(clean_env, patched_env)
    check_set(catalog, set_name, clean_env)
    check_set(catalog, set_name, patched_env)
    versions = clean_env.versions
    patched_cases = [c for c in cases if c.patches]
    chosen = {c.id: choose(list(c.patches), versions) for c in patched_cases}
    rows: dict[str, ProofRow] = {}
    for case in patched_cases:
        complete = not _missing(catalog, case, chosen[case.id], set_name)
        declared = case.declared(set_name)
        rows[case.id] = ProofRow(
            case.id,
            case.family,
            [p.rel for p in chosen[case.id]],
            declared,
            "",
            "",
            "pass" if complete or declared == "pass" else "fail",
            "",
            "",
            "",
        )
    runnable = [c for c in patched_cases if not _skip(rows[c.id], c, clean_env)]
    for case, outcome in zip(
        runnable, _outcomes(runnable, clean_env, timeout, runs.jobs), strict=False
    ):  # the unpatched twins
        rows[case.id].unpatched, rows[case.id].unpatched_headline = outcome
        log(f"{case.id}: unpatched {rows[case.id].unpatched}")
    for case in runnable:  # chains: the case's own patches, added one at a time
        own = chosen[case.id]
        if len(own) < 2:
            continue
        for step in range(1, len(own) + 1):
            patching.apply_patches(own[:step], patched)
            observed, headline = _outcome(case, patched_env, timeout)
            rows[case.id].chain.append(
                {"patches": " + ".join(p.id for p in own[:step]), "observed": observed, "headline": headline}
            )
        patching.revert_patches(patched)
    # every patch at once, in the order the cases list them (a case lists its patches in stacking order)
    every = list(dict.fromkeys(p for c in patched_cases for p in chosen[c.id]))
    reports = patching.apply_patches(every, patched)
    for case, outcome in zip(
        runnable, _outcomes(runnable, patched_env, timeout, runs.jobs), strict=False
    ):  # every patch at once
        row = rows[case.id]
        row.patched, row.patched_headline = outcome
        row.verdict = _verdict(row)
        log(f"{case.id}: patched {row.patched} ({row.verdict})")
    # a CUDA case cannot run at all without CUDA: nothing to compare there
    absent = [c for c in patched_cases if c not in runnable and not (c.device == "cuda" and not clean_env.cuda)]
    _prove_no_harm(absent, rows, sides, runs)
    emulable = [c for c in runnable if _emulable(c)]
    _prove_no_harm(emulable, rows, sides, runs, emulated=True)
    applied = {p.id for p in every}
    controls = [c for c in catalog.controls if applied & set(c.near)]
    return {
        "set": set_name,
        "machine": clean_env.machine,
        "gpu": clean_env.gpu,
        "gpus": clean_env.gpus,
        "python": clean_env.python_version,
        "versions": versions,
        "date": _dt.date.today().isoformat(),
        "applied": [p.rel for p in every],
        "hunks": [asdict(r) for r in reports],
        "cases": [asdict(rows[c.id]) for c in patched_cases],
        "controls": _prove_controls(controls, sides, runs),
    }


def _prove_controls(controls: list[Control], sides: Sides, runs: ProofRuns) -> list[dict[str, Any]]:
    """Each control (near the applied patches' path, without their bugs) unpatched and with every patch, and again
    with the CPU features it names emulated absent where this CPU has them: it must pass on both sides. Failing
    unpatched, the catalog's claim is wrong ("differs"); failing patched only, it is harm."""
    rows = []
    for control in controls:
        reason = skip_reason(control.case, sides.clean)
        if reason:
            rows.append(
                {"control": control.case.id, "near": list(control.near), "verdict": "skipped", "reason": reason}
            )
            continue
        row = {
            "control": control.case.id,
            "near": list(control.near),
            **_control_pair(control, sides, runs.timeout),
        }
        absent = tuple(f for f in control.emulate_absent if f in EMULABLE_ABSENT and f in (sides.clean.cpu_flags or ()))
        if absent:  # bitsandbytes picks its CPU kernels by such a feature
            row["emulated_absent"] = {
                "features": list(absent),
                **_control_pair(control, sides, runs.timeout, absent),
            }
            if row["verdict"] == "no harm" and row["emulated_absent"]["verdict"] in ("harm", "differs"):
                row["verdict"] = row["emulated_absent"]["verdict"]
        runs.log(f"control {control.case.id}: {row['verdict']}")
        rows.append(row)
    return rows


def _control_pair(control: Control, sides: Sides, timeout: float, absent: tuple[str, ...] = ()) -> dict[str, str]:
    (unpatched, unpatched_headline), (observed, headline) = (
        _outcome(control.case, env, timeout, absent) for env in (sides.clean, sides.patched)
    )
    verdict = "differs" if not _passes(unpatched) else "no harm" if _passes(observed) else "harm"
    if NOT_EMULATED in (unpatched, observed):
        verdict = "not checked: the emulation did not take effect"
    return {
        "unpatched": unpatched,
        "unpatched_headline": unpatched_headline,
        "patched": observed,
        "patched_headline": headline,
        "verdict": verdict,
    }


def _prove_no_harm(
    absent: list[Case],
    rows: dict[str, ProofRow],
    sides: Sides,
    runs: ProofRuns,
    emulated: bool = False,
) -> None:
    """A patch is proved twice: it fixes its case, and it changes nothing where the case's precondition is absent.
    Such a case (skipped above: no AVX512-BF16 here, CUDA present, one GPU) runs anyway, without and with every
    patch; a pass that the patches turn into a failure is harm, and `patch prove` says so and fails. `emulated`:
    the case ran above; here its CPU features are emulated absent (a machine without them is not at hand)."""
    if not absent:
        return
    before = _outcomes(absent, sides.clean, runs.timeout, runs.jobs, emulated)
    after = _outcomes(absent, sides.patched, runs.timeout, runs.jobs, emulated)
    for case, (unpatched, _), (observed, headline) in zip(absent, before, after, strict=False):
        harm = _passes(unpatched) and not _passes(observed)
        verdict = f"{'harm' if harm else 'no harm'}: {unpatched} -> {observed}" + (
            f" ({headline[:80]})" if harm else ""
        )
        if NOT_EMULATED in (unpatched, observed):
            verdict = "not checked: the emulation did not take effect (the run never imported what it patches)"
        if emulated:
            rows[case.id].no_harm_emulated = verdict
        else:
            rows[case.id].no_harm = verdict
        runs.log(f"{case.id}: precondition {'emulated ' if emulated else ''}absent here; {verdict}")


def _missing(catalog: Catalog, case: Case, chosen: list[patching.Patch], set_name: str) -> list[str]:
    """The patch ids the set needs for the case that have no variant for it."""
    have = {p.id for p in chosen}
    return [pid for pid in patching.needed(catalog, case, set_name) if pid not in have]


def _skip(row: ProofRow, case: Case, env: Environment) -> bool:
    reason = skip_reason(case, env)
    if reason:
        row.unpatched = row.patched = row.verdict = "skipped"
        row.reason = reason
    return reason is not None


def _verdict(row: ProofRow) -> str:
    failing = row.declared in FAILING
    twin_ok = _fails(row.unpatched) if failing else _passes(row.unpatched)
    if not twin_ok:
        return "differs"
    if row.expected_patched == "fail":
        return "no patch for this release" if _fails(row.patched) else "differs"
    if not _passes(row.patched):
        return "differs"
    return "proved" if failing else "upstream-fixed"


def format_proof(document: dict[str, Any]) -> str:
    rows = [("case", "patches", "unpatched", "patched", "verdict")]
    for c in document["cases"]:
        rows.append(
            (
                c["case"],
                ", ".join(Path(p).stem for p in c["patches"]) or "-",
                f"{c['unpatched']}"
                + (
                    f" ({c['unpatched_headline'][:50]})"
                    if c["unpatched"] != "pass" and c["unpatched"] != "skipped"
                    else ""
                ),
                f"{c['patched']}"
                + (f" ({c['patched_headline'][:50]})" if c["patched"] not in ("pass", "skipped") else ""),
                c["verdict"]
                + (f": {c['reason']}" if c["reason"] else "")
                + (f"; {c['no_harm']}" if c.get("no_harm") else "")
                + (f"; emulated without its CPU feature, {c['no_harm_emulated']}" if c.get("no_harm_emulated") else ""),
            )
        )
        for step in c["chain"]:
            rows.append(
                (
                    "",
                    f"  chain: {step['patches']}",
                    "",
                    f"{step['observed']} ({step['headline'][:50]})" if step["observed"] != "pass" else "pass",
                    "",
                )
            )
    for c in document.get("controls", []):
        rows.append(
            (
                f"{c['control']} (control)",
                "near: " + ", ".join(pid.split("/")[1] for pid in c["near"]),
                c.get("unpatched", "skipped"),
                c.get("patched", "skipped")
                + (f" ({c['patched_headline'][:50]})" if c.get("patched", "pass") not in ("pass", "skipped") else ""),
                c["verdict"]
                + (f": {c['reason']}" if c.get("reason") else "")
                + (
                    f"; emulated without {', '.join(c['emulated_absent']['features'])}: "
                    f"{c['emulated_absent']['verdict']}"
                    if c.get("emulated_absent")
                    else ""
                ),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "| " + " | ".join(cell.replace("|", "\\|").ljust(w) for cell, w in zip(r, widths, strict=False)) + " |"
        for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
