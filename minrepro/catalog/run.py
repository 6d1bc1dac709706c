"""Run catalog cases in an environment and judge each against the manifest."""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from minrepro.catalog.manifest import FAILING, Catalog, Case, expected_outcome
from minrepro.dirs import scrubbed
from minrepro.errors import MinreproError
from minrepro.harness.probe import Environment
from minrepro.harness.executors import ColdExecutor, ForkServerExecutor
from minrepro.harness.runner import RunResult, run_script
from minrepro.reducers.source import module_imports
from minrepro.harness.signature import Signature, parse_traceback


@dataclass(frozen=True)
class CaseRuns:
    """How cases run: each run's timeout, where progress goes, how many at a time, and `warm`: in a fork server that
    imports the libraries once."""

    timeout: float
    progress: Callable[[str], None] = lambda _: None
    jobs: int = 1
    warm: bool = False


@dataclass(frozen=True)
class CaseResult:
    case: str
    family: str
    device: str
    expected: str | None
    observed: str  # "pass" | "fail" | "fail-other" | "skipped"
    headline: str
    signature: dict[str, Any] | None
    seconds: float
    verdict: str  # "as declared" | "differs" | "skipped" | "no expectation"
    reason: str = ""


def observe(case: Case, result: RunResult) -> tuple[str, str]:
    """('pass' | 'fail' | 'fail-other', why) for one run of a case."""
    if result.signature is None:
        return "pass", ""
    if not re.search(case.signature, result.raw_headline):
        return "fail-other", f"final line does not match /{case.signature}/"
    owner = result.signature.owner
    if case.owner and str(owner) != case.owner:
        return "fail-other", f"owning function is {owner}, manifest says {case.owner}"
    if case.seed_trace is not None:
        seed = parse_traceback(case.seed_trace.read_text(encoding="utf-8"))
        if seed is None or seed.coarse() != result.signature.coarse():
            return "fail-other", f"differs from the seed trace's origin ({seed.coarse() if seed else 'unparsable'})"
    return "fail", ""


def verdict(expected: str | None, observed: str) -> str:
    if expected is None:
        return "no expectation"
    ok = observed == expected if expected in FAILING else observed == "pass"
    return "as declared" if ok else "differs"


def skip_reason(case: Case, env: Environment) -> str | None:
    if case.device == "cuda" and not env.cuda:
        return "needs CUDA; none in this environment"
    if env.gpus is not None and case.requires_gpus > env.gpus:
        return f"needs {case.requires_gpus} GPUs on one host; this environment has {env.gpus}"
    if case.requires_no_cuda and env.cuda:
        return f"needs a machine without CUDA: {case.requires_no_cuda}"
    missing = [flag for flag in case.requires_cpu_flags if env.cpu_flags is not None and flag not in env.cpu_flags]
    if missing:
        return f"needs CPU feature(s) {', '.join(missing)}"
    return None


def run_cases(
    cases: Iterable[Case],
    env: Environment,
    set_name: str | None,
    settings: CaseRuns,
    timings: dict[str, Any] | None = None,
) -> list[CaseResult]:
    """Run the cases, `settings.jobs` at a time; under `settings.warm` any case whose verdict differs from the
    manifest in the fork server is run again cold before it is believed. `timings` receives where the wall time
    went (the server's starts, the runs, the cold confirmations)."""
    progress, warm = settings.progress, settings.warm
    cases = list(cases)
    timings = {} if timings is None else timings
    skipped = {case.id: skip_reason(case, env) for case in cases}
    runnable = [case for case in cases if not skipped[case.id]]
    runs = dict(zip((c.id for c in runnable), _execute(runnable, env, settings, timings), strict=False))
    timings["confirm_seconds"] = 0.0
    results = []
    for case in cases:
        expected = expected_outcome(case, set_name, env.versions)
        if skipped[case.id]:
            results.append(
                CaseResult(
                    case.id, case.family, case.device, expected, "skipped", "", None, 0.0, "skipped", skipped[case.id]
                )
            )
            progress(f"{case.id}: skipped ({skipped[case.id]})")
            continue
        run = runs[case.id]
        observed, why = observe(case, run)
        if warm and verdict(expected, observed) == "differs":
            progress(f"{case.id}: {observed} under the fork server; confirming cold")
            run = run_script(case.script, python=env.python, timeout=settings.timeout, isolated=True)
            timings["confirm_seconds"] = round(timings["confirm_seconds"] + run.seconds, 1)
            observed, why = observe(case, run)
        sig: Signature | None = run.signature
        results.append(
            CaseResult(
                case.id,
                case.family,
                case.device,
                expected,
                observed,
                run.raw_headline.split("\n", 1)[0],
                sig.to_dict() if sig else None,
                round(run.seconds, 1),
                verdict(expected, observed),
                why,
            )
        )
        progress(f"{case.id}: {observed} in {run.seconds:.1f} s")
    return results


def _execute(cases: list[Case], env: Environment, settings: CaseRuns, timings: dict[str, Any]) -> list[RunResult]:
    if not cases:
        return []
    jobs, progress = settings.jobs, settings.progress
    scripts = [case.script for case in cases]
    executor: ColdExecutor | ForkServerExecutor = ColdExecutor(env.python, jobs)
    if settings.warm:
        preload = list(dict.fromkeys(m for case in cases for m in module_imports(case.script.read_text())))
        began = time.monotonic()
        try:
            executor = ForkServerExecutor(env.python, preload, jobs)
        except MinreproError as exc:
            progress(f"fork server unavailable ({exc}); cold runs")
        else:
            for start in executor.starts:
                progress(f"fork server start: {start.describe()}")
            timings["server_starts"] = [round(start.seconds, 1) for start in executor.starts]
        timings["warmup_seconds"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    try:
        return executor.run_many(scripts, settings.timeout)
    finally:
        executor.close()
        timings["runs_seconds"] = round(time.monotonic() - began, 1)


def check_set(catalog: Catalog, set_name: str, env: Environment) -> None:
    """A one-line error unless the installed versions are exactly the named set's pins."""
    wrong = [
        f"{dist} {env.versions.get(dist)} != {version}"
        for dist, version in catalog.version_set(set_name).pins().items()
        if env.versions.get(dist) != version
    ]
    if wrong:
        raise MinreproError(f"installed versions are not the {set_name} set: {'; '.join(wrong)}")


def results_document(env: Environment, set_name: str | None, results: list[CaseResult]) -> dict[str, Any]:
    return {
        "set": set_name,
        "machine": env.machine,
        "gpu": env.gpu,
        "python": env.python_version,
        "versions": env.versions,
        "cpu_flags": list(env.cpu_flags or ()),
        "gpus": env.gpus,
        "date": _dt.date.today().isoformat(),
        "cases": [asdict(r) for r in results],
    }


def format_table(results: list[CaseResult]) -> str:
    """A Markdown table: case, expected, observed, signature, seconds, verdict."""
    rows = [("case", "family", "expected", "observed", "signature", "s", "verdict")]
    for r in results:
        detail = r.reason if r.observed in ("skipped", "fail-other") else r.headline
        rows.append((r.case, r.family, r.expected or "-", r.observed, _clip(detail, 70), f"{r.seconds:.1f}", r.verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def write_results(path: Path, document: dict[str, Any]) -> None:
    """Record a document for others to read: no path of this machine in it (`dirs.scrubbed`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(scrubbed(document), indent=2, sort_keys=False) + "\n", encoding="utf-8")
