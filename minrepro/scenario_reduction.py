"""The whole trip: a seed scenario (a Gemma 4 spec) -> structured passes over the spec -> the script reducer.

Spec candidates are judged by rendering and running them; one is kept when its failure is the original's
entered lower down (`Signature.is_tail_of`): same type, message and causes, its library frames the
innermost of the original's. That is what lets a toy calling `dispatch_model` replace PEFT and Gemma 4.
The script reducer then keeps the final spec's signature exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from reducers.scenario import BUILT, Scenario, checkpoint_key, presets, render, render_build, scaled
from reducers.scenario_passes import SCENARIO_PASSES

from .errors import MinreproError
from .reduction import ReduceOptions, ReduceSummary, reduce_script
from .runner import RunResult, resolve_python, run_script
from .signature import Signature

CHECKPOINTS = ".minrepro/scenario-checkpoints"
BUILD_TIMEOUT = 1800.0  # an E2B/E4B checkpoint build; a build killed at a candidate's timeout never completes


@dataclass
class ScenarioTrip:
    steps: list[tuple[str, Scenario, str]] = field(default_factory=list)  # (pass, spec, headline)
    runs: int = 0


def run_rendered(source: str, directory: Path, python: str, timeout: float) -> RunResult:
    """Write one rendered scenario under its content hash and run it (the checkpoint cache is whatever
    MINREPRO_SCENARIO_CACHE says in this process)."""
    path = directory / f"{_digest(source)}.py"
    path.write_text(source, encoding="utf-8")
    return run_script(path, python=python, timeout=timeout)


def prebuild(spec: Scenario, directory: Path, python: str) -> float:
    """Build the spec's checkpoint into the shared cache before its timed run (the build is not the bug).
    A build that fails is left to the timed run, which meets the same error and records it."""
    source = render_build(spec)
    cache = os.environ.get("MINREPRO_SCENARIO_CACHE")
    if source is None or (cache and (Path(cache) / checkpoint_key(spec) / BUILT).is_file()):
        return 0.0  # cheap enough to build in the run, or built already (a process start saved: 15 s on a loaded box)
    return run_rendered(source, directory, python, BUILD_TIMEOUT).seconds


def steps_dir_of(out: Path) -> Path:
    """Where `--keep-steps` puts the accepted steps of a reduction written to `out` (X.min.py: X.steps)."""
    return out.with_name(out.name.removesuffix(".py").removesuffix(".min") + ".steps")


def _digest(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()[:16]


def use_checkpoint_cache(python: str) -> None:
    """Share built checkpoints between runs in one environment. Per interpreter: a checkpoint or adapter
    built with patched peft (which accepts broad targets) must not serve an unpatched one."""
    where = Path(CHECKPOINTS).resolve() / hashlib.sha1(str(Path(python).absolute()).encode()).hexdigest()[:12]
    os.environ["MINREPRO_SCENARIO_CACHE"] = str(where)


def scenario_table(names: list[str], scale: str, device: str, python: str, timeout: float,
                   on_row: Callable[[list[dict]], None], measured: list[dict] = ()) -> list[dict]:
    """Run each preset once: outcome, signature headline, owner, seconds. `on_row` sees the rows so far after
    every preset (a table cut short keeps what it measured); a preset with a row in `measured` (a table cut
    short before, same environment) keeps that row instead of running again."""
    available = presets(device)
    use_checkpoint_cache(python)
    before = {r["preset"]: r for r in measured if r["scale"] == scale and r["device"] == device}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="minrepro-scenarios-") as tmp:
        for name in names:
            if name in before:
                rows.append(before[name])
                continue
            spec = scaled(available[name], scale)
            build = prebuild(spec, Path(tmp), python)
            result = run_rendered(render(spec), Path(tmp), python, timeout)
            sig = result.signature
            rows.append({"preset": name, "scale": scale, "device": device, "outcome": "fail" if sig else "pass",
                         "headline": result.raw_headline.split("\n", 1)[0], "owner": str(sig.owner) if sig else "",
                         "seconds": round(result.seconds, 1), "build_seconds": round(build, 1)})
            on_row(rows)
    return rows


def reduce_scenario(preset: str, scale: str, device: str, opts: ReduceOptions, keep_steps: bool,
                    log: Callable[[str], None] = lambda _: None) -> tuple[ScenarioTrip, ReduceSummary]:
    available = presets(device)
    if preset not in available:
        raise MinreproError(f"unknown scenario preset {preset!r} (known: {', '.join(available)})")
    spec = scaled(available[preset], scale)
    workdir = (opts.workdir or Path(".minrepro") / f"scenario-{preset}-{scale}-{device}").resolve()
    (workdir / "candidates").mkdir(parents=True, exist_ok=True)
    python = resolve_python(opts.python)
    use_checkpoint_cache(python)  # shared with `minrepro scenario table` (an E2B build takes minutes)
    cache_path = workdir / "judged.json"
    judged: dict[str, dict] = json.loads(cache_path.read_text()) if cache_path.is_file() and not opts.fresh else {}
    trip = ScenarioTrip()

    def run(candidate: Scenario, source: str) -> Signature | None:
        digest = _digest(source)
        if digest not in judged:
            prebuild(candidate, workdir / "candidates", python)
            result = run_rendered(source, workdir / "candidates", python, opts.timeout)
            trip.runs += 1
            judged[digest] = {"signature": result.signature.to_dict() if result.signature else None,
                              "headline": result.raw_headline.split("\n", 1)[0]}
            cache_path.write_text(json.dumps(judged))
        raw = judged[digest]["signature"]
        return Signature.from_dict(raw) if raw else None

    current = render(spec)
    target = run(spec, current)
    if target is None:
        raise MinreproError(f"scenario {preset} ({scale}, {device}) passes here: nothing to reduce")
    if target.kind == "timeout":  # not cached: a later run with a longer --timeout must run it again
        judged.pop(_digest(current))
        cache_path.write_text(json.dumps(judged))
        raise MinreproError(f"scenario {preset} ({scale}) timed out after {opts.timeout:.0f} s (its checkpoint build "
                            "not counted); raise --timeout, or reduce a timeout with a script and --signature")
    log(f"{preset}: {target.headline}")
    trip.steps.append(("preset", spec, target.headline))
    changed = True
    while changed:
        changed = False
        for scenario_pass in SCENARIO_PASSES:
            for candidate in scenario_pass(spec):
                source = render(candidate)
                if source == current:  # a field the current rendering ignores (a toy's quant)
                    continue
                sig = run(candidate, source)
                if sig is not None and sig.is_tail_of(target):
                    spec, current, changed = candidate, source, True
                    trip.steps.append((scenario_pass.__name__, spec, sig.headline))
                    log(f"  {scenario_pass.__name__}: accepted ({len(current.splitlines())} lines)")
                    break
    out = opts.out or Path(f"{preset}.min.py")
    steps_dir = steps_dir_of(out.resolve())
    final = workdir / "final-spec.py"
    final.write_text(current, encoding="utf-8")
    if keep_steps:
        steps_dir.mkdir(parents=True, exist_ok=True)
        for i, (name, step, headline) in enumerate(trip.steps):
            (steps_dir / f"{i:02d}-{name}.py").write_text(render(step), encoding="utf-8")
            (steps_dir / f"{i:02d}-{name}.json").write_text(step.to_json() + "\n", encoding="utf-8")
    # the script phase builds its own checkpoint: with the cache visible the reducer would delete the build
    # and leave a script that only runs on this machine
    os.environ.pop("MINREPRO_SCENARIO_CACHE", None)
    summary = reduce_script(ReduceOptions(**{**opts.__dict__, "script": final, "out": out, "workdir": workdir / "script"}), log)
    if keep_steps:
        (steps_dir / f"{len(trip.steps):02d}-script-reducer.py").write_text(Path(summary.output).read_text(), encoding="utf-8")
    return trip, summary
