"""The whole trip: a seed scenario (a Gemma 4 spec) -> structured passes over the spec -> the script reducer.

Spec candidates are judged by rendering and running them; one is kept when its failure is the original's
entered lower down (`Signature.is_tail_of`): same type, message and causes, its library frames the
innermost of the original's. That is what lets a toy calling `dispatch_model` replace PEFT and Gemma 4.
The script reducer then keeps the final spec's signature exactly.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from ..dirs import cache
from ..errors import MinreproError
from ..envs.venvs import env_of, read_marker
from ..harness.probe import probe
from ..catalog.manifest import load_catalog
from ..harness.executors import Executor, ExecutorOptions, make_executor
from ..harness.runner import resolve_python, run_script
from ..harness.signature import Signature
from ..reducers.source import module_imports
from ..reduction.driver import reduce_script
from ..reduction.options import ReduceOptions
from ..reduction.summary import ReduceSummary
from .passes import SCENARIO_PASSES
from .presets import SEED_REPORTS, presets
from .render import render
from .spec import Scenario
from .table import (
    CHECKPOINT_ENV,
    checkpoint_namespace,
    digest,
    prebuild,
    run_rendered,
    spec_namespace,
    use_checkpoint_cache,
    write_rendered,
)


# Of a time budget, what the spec passes may spend: the script phase establishes and guards again before its
# first candidate, several runs of the script, and spec passes that took more would leave it no time for one
SPEC_SHARE = 0.5


def _rendered(spec: Scenario) -> str | None:
    """A spec candidate's script, or None where a pass proposed a spec no script can stand for (a placement check
    without the adapter load it compares): not a candidate, not the end of the reduction."""
    try:
        return render(spec)
    except ValueError:
        return None


@dataclass
class ScenarioTrip:
    steps: list[tuple[str, Scenario, str]] = field(default_factory=list)  # (pass, spec, headline)
    runs: int = 0


def steps_file_of(out: Path) -> Path:
    """Where `--keep-steps` records the accepted spec steps of a reduction written to `out` (X.min.py:
    X.steps.json): each step's pass, headline and spec, from which any step's script can be rendered again."""
    return out.with_name(out.name.removesuffix(".py").removesuffix(".min") + ".steps.json")


def write_steps(path: Path, trip: ScenarioTrip, preset: str, scale: str, device: str) -> None:
    steps = [
        {"pass": name, "headline": headline, "spec": json.loads(step.to_json())} for name, step, headline in trip.steps
    ]
    path.write_text(
        json.dumps(
            {"preset": preset, "scale": scale, "device": device, "scenario_runs": trip.runs, "steps": steps}, indent=1
        )
        + "\n",
        encoding="utf-8",
    )


def read_steps(path: Path) -> list[tuple[str, Scenario, str]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [(s["pass"], Scenario.from_json(json.dumps(s["spec"])), s["headline"]) for s in doc["steps"]]


@dataclass(frozen=True)
class ScenarioTarget:
    """The scenario reduced: its label (a preset's name; it names the workdir, the output and the steps) and the
    model dimensions and device it runs at."""

    label: str
    scale: str
    device: str


def reduce_scenario(
    which: ScenarioTarget, opts: ReduceOptions, keep_steps: bool, log: Callable[[str], None] = lambda _: None
) -> tuple[ScenarioTrip, ReduceSummary]:
    """The preset named by `which.label`."""
    preset, scale, device = which.label, which.scale, which.device
    available = presets(device, scale)
    if preset not in available:
        raise MinreproError(
            f"unknown scenario preset {preset!r} for {device} at {scale} (known: {', '.join(available)})"
        )
    return reduce_spec(available[preset], which, opts, keep_steps, log)


class SpecRuns:
    """Judges spec candidates by rendering and running them: each candidate's signature, cached in the work dir by
    its source, the unjudged ones `jobs` at a time (warm once `warm` started the executor)."""

    def __init__(self, workdir: Path, python: str, opts: ReduceOptions, trip: ScenarioTrip) -> None:
        self.workdir, self.python, self.timeout, self.trip = workdir, python, opts.timeout, trip
        self.jobs = max(1, opts.jobs)  # candidates judged at once
        self.cache_path = workdir / "judged.json"
        fresh = opts.fresh or not self.cache_path.is_file()
        self.judged: dict[str, dict] = {} if fresh else json.loads(self.cache_path.read_text())
        self.executor: Executor | None = None  # started after the first (cold) run, preloading what it imported

    def __call__(self, batch: list[tuple[Scenario, str]], keep_modules: bool = False) -> list[Signature | None]:
        """`keep_modules`: also record what the run imported (the original's: what the executor preloads)."""
        folder = self.workdir / "candidates"
        todo = list({digest(src): (c, src) for c, src in batch if digest(src) not in self.judged}.items())
        for _, (candidate, _) in todo:
            prebuild(candidate, folder, self.python)
        results = (
            self.executor.run_many([write_rendered(src, folder) for _, (_, src) in todo], self.timeout)
            if self.executor and todo
            else [run_rendered(src, folder, self.python, self.timeout) for _, (_, src) in todo]
        )
        for (key, _), result in zip(todo, results, strict=False):
            self.judged[key] = {
                "signature": result.signature.to_dict() if result.signature else None,
                "headline": result.raw_headline.split("\n", 1)[0],
                **({"modules": list(result.modules)} if keep_modules else {}),
            }
        self.trip.runs += len(todo)
        if todo:
            self.save()
        return [self.signature(src) for _, src in batch]

    def signature(self, source: str) -> Signature | None:
        found = self.judged[digest(source)]["signature"]
        return Signature.from_dict(found) if found else None

    def forget(self, source: str) -> None:
        self.judged.pop(digest(source))
        self.save()

    def save(self) -> None:
        self.cache_path.write_text(json.dumps(self.judged))

    def warm(self, kind: str, source: str) -> None:
        """The spec passes run warm: cold, each candidate (a tiny Gemma 4) pays every import again, one at a time,
        and the imports, not the runs, use up the budget."""
        if kind != "cold":
            recorded = ExecutorOptions(self.judged[digest(source)].get("modules", ()))
            self.executor = make_executor(kind, self.python, module_imports(source), self.jobs, recorded)

    def close(self) -> None:
        if self.executor:
            self.executor.close()


def reduce_spec(
    spec: Scenario,
    which: ScenarioTarget,
    opts: ReduceOptions,
    keep_steps: bool,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[ScenarioTrip, ReduceSummary]:
    """Reduce from any spec (a preset, a spec file, a finding of `explore`): spec passes, then the script.
    `opts.max_seconds` bounds the whole: the spec passes stop at it, the script phase gets what is left."""
    label, scale, device = which.label, which.scale, which.device
    began = time.monotonic()
    workdir = (opts.workdir or cache("reductions", f"scenario-{label}-{scale}-{device}")).resolve()
    (workdir / "candidates").mkdir(parents=True, exist_ok=True)
    python = resolve_python(opts.python)
    env = probe(python)
    patches = (read_marker(env_of(python)) or {}).get("patches", [])
    # shared with `scenario table` (an E4B checkpoint is 18 GB and slow to build)
    use_checkpoint_cache(spec_namespace(checkpoint_namespace(env.versions, patches), patches, spec))
    trip = ScenarioTrip()
    judge = SpecRuns(workdir, python, opts, trip)
    current = render(spec)
    target = first_failure(judge, spec, current, which)
    log(f"{label}: {target.headline}")
    trip.steps.append(("preset", spec, target.headline))
    until = None if opts.max_seconds is None else began + SPEC_SHARE * opts.max_seconds
    judge.warm(opts.executor, current)
    try:
        spec, current, stopped = spec_passes(judge, (spec, current), target, until, log)
    finally:
        judge.close()
    if stopped:
        log(
            f"  spec passes stopped at their share of the time budget ({SPEC_SHARE * opts.max_seconds:g} of "
            f"{opts.max_seconds:g} s)"
        )
    out = opts.out or Path(f"{label}.min.py")
    final = workdir / "final-spec.py"
    final.write_text(current, encoding="utf-8")
    if keep_steps:
        write_steps(steps_file_of(out.resolve()), trip, label, scale, device)
    # the script phase builds its own checkpoint: with the cache visible the reducer would delete the build
    # and leave a script that only runs on this machine
    os.environ.pop(CHECKPOINT_ENV, None)
    # the spec passes already shrank the model: the script's own build is what a scale-down would redo
    left = None if opts.max_seconds is None else max(1.0, opts.max_seconds - (time.monotonic() - began))
    summary = reduce_script(
        ReduceOptions(
            **{
                **opts.__dict__,
                "script": final,
                "out": out,
                "workdir": workdir / "script",
                "scale_down": False,
                "max_seconds": left,
            }
        ),
        log,
    )
    if keep_steps:
        record_equivalence(steps_file_of(out.resolve()), out, label, python, opts.timeout)
    return trip, summary


def first_failure(judge: SpecRuns, spec: Scenario, current: str, which: ScenarioTarget) -> Signature:
    """The spec's own failure, judged cold (what the warm executor then preloads); a one-line error where it passes
    or times out."""
    [target] = judge([(spec, current)], keep_modules=True)
    if target is None:
        raise MinreproError(f"scenario {which.label} ({which.scale}, {which.device}) passes here: nothing to reduce")
    if target.kind == "timeout":  # not cached: a later run with a longer --timeout must run it again
        judge.forget(current)
        raise MinreproError(
            f"scenario {which.label} ({which.scale}) timed out after {judge.timeout:.0f} s (its checkpoint build "
            "not counted); raise --timeout, or reduce a timeout with a script and --signature"
        )
    return target


def spec_passes(
    judge: SpecRuns,
    start: tuple[Scenario, str],
    target: Signature,
    until: float | None,
    log: Callable[[str], None],
) -> tuple[Scenario, str, bool]:
    """The spec passes until a round changes nothing or `until` (their share of the budget) comes: the spec, its
    rendering, and whether the budget cut them short. Candidates go in order, `jobs` at a time: the first
    interesting one wins, whatever the worker count."""
    spec, current = start
    width = judge.jobs
    changed = True
    while changed:
        changed = False
        for scenario_pass in SCENARIO_PASSES:
            if until is not None and time.monotonic() > until:
                return spec, current, True
            # a field it ignores renders the same script: not a candidate
            candidates = [(c, src) for c in scenario_pass(spec) if (src := _rendered(c)) is not None and src != current]
            for begin in range(0, len(candidates), width):
                if until is not None and time.monotonic() > until:
                    return spec, current, True
                batch = candidates[begin : begin + width]
                signatures = judge(batch)
                hit = next(
                    (
                        (c, src, sig)
                        for (c, src), sig in zip(batch, signatures, strict=False)
                        if sig and sig.is_tail_of(target)
                    ),
                    None,
                )
                if hit:
                    spec, current, changed = hit[0], hit[1], True
                    judge.trip.steps.append((scenario_pass.__name__, spec, hit[2].headline))
                    log(f"  {scenario_pass.__name__}: accepted ({len(current.splitlines())} lines)")
                    break
    return spec, current, False


def record_equivalence(steps_file: Path, reduction: Path, preset: str, python: str, timeout: float) -> dict | None:
    """Run the reduction and its family's catalog case in one environment and record whether they are the same
    failure: the same signature, the same owning function. Written into the steps file beside the reduction."""
    report = SEED_REPORTS.get(preset)
    if report is None or report.case is None:
        return None
    [case] = load_catalog().select([report.case])
    ours, theirs = (run_script(path, python=python, timeout=timeout).signature for path in (reduction, case.script))
    record = {
        "case": case.id,
        "python": python,
        "reduction": ours.to_dict() if ours else None,
        "case_signature": theirs.to_dict() if theirs else None,
        "same_signature": ours is not None and ours == theirs,
        "same_owner": ours is not None and theirs is not None and ours.owner == theirs.owner,
    }
    doc = json.loads(steps_file.read_text(encoding="utf-8")) if steps_file.is_file() else {}
    doc["catalog_case"] = record
    steps_file.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return record
