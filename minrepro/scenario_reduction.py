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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from reducers.scenario import Scenario, presets, render, scaled
from reducers.scenario_passes import SCENARIO_PASSES

from .errors import MinreproError
from .reduction import ReduceOptions, ReduceSummary, reduce_script
from .runner import resolve_python, run_script
from .signature import Signature

CHECKPOINTS = ".minrepro/scenario-checkpoints"


@dataclass
class ScenarioTrip:
    steps: list[tuple[str, Scenario, str]] = field(default_factory=list)  # (pass, spec, headline)
    runs: int = 0


def reduce_scenario(preset: str, scale: str, device: str, opts: ReduceOptions, keep_steps: bool,
                    log: Callable[[str], None] = lambda _: None) -> tuple[ScenarioTrip, ReduceSummary]:
    available = presets(device)
    if preset not in available:
        raise MinreproError(f"unknown scenario preset {preset!r} (known: {', '.join(available)})")
    spec = scaled(available[preset], scale)
    workdir = (opts.workdir or Path(".minrepro") / f"scenario-{preset}-{scale}-{device}").resolve()
    (workdir / "candidates").mkdir(parents=True, exist_ok=True)
    # checkpoints shared with `minrepro scenario table` (an E2B build takes minutes); inherited by every run
    os.environ.setdefault("MINREPRO_SCENARIO_CACHE", str(Path(CHECKPOINTS).resolve()))
    python = resolve_python(opts.python)
    cache_path = workdir / "judged.json"
    judged: dict[str, dict] = json.loads(cache_path.read_text()) if cache_path.is_file() and not opts.fresh else {}
    trip = ScenarioTrip()

    def run(candidate: Scenario) -> Signature | None:
        source = render(candidate)
        digest = hashlib.sha1(source.encode()).hexdigest()[:16]
        if digest not in judged:
            path = workdir / "candidates" / f"{digest}.py"
            path.write_text(source, encoding="utf-8")
            result = run_script(path, python=python, timeout=opts.timeout)
            trip.runs += 1
            judged[digest] = {"signature": result.signature.to_dict() if result.signature else None,
                              "headline": result.raw_headline.split("\n", 1)[0]}
            cache_path.write_text(json.dumps(judged))
        raw = judged[digest]["signature"]
        return Signature.from_dict(raw) if raw else None

    target = run(spec)
    if target is None:
        raise MinreproError(f"scenario {preset} ({scale}, {device}) passes here: nothing to reduce")
    if target.kind == "timeout":  # a first run also builds the checkpoint; its timeout is not the bug
        judged.pop(next(reversed(judged)))
        cache_path.write_text(json.dumps(judged))
        raise MinreproError(f"scenario {preset} ({scale}) timed out after {opts.timeout:.0f} s; raise --timeout "
                            "(the first run builds the checkpoint) or reduce a timeout with a script and --signature")
    log(f"{preset}: {target.headline}")
    trip.steps.append(("preset", spec, target.headline))
    changed = True
    while changed:
        changed = False
        for scenario_pass in SCENARIO_PASSES:
            for candidate in scenario_pass(spec):
                if render(candidate) == render(spec):  # a field the current rendering ignores (a toy's quant)
                    continue
                sig = run(candidate)
                if sig is not None and sig.is_tail_of(target):
                    spec, changed = candidate, True
                    trip.steps.append((scenario_pass.__name__, spec, sig.headline))
                    log(f"  {scenario_pass.__name__}: accepted ({len(render(spec).splitlines())} lines)")
                    break
    steps_dir = (opts.out or Path(f"{preset}.min.py")).resolve().with_suffix(".steps")
    final = workdir / "final-spec.py"
    final.write_text(render(spec), encoding="utf-8")
    if keep_steps:
        steps_dir.mkdir(parents=True, exist_ok=True)
        for i, (name, step, headline) in enumerate(trip.steps):
            (steps_dir / f"{i:02d}-{name}.py").write_text(render(step), encoding="utf-8")
            (steps_dir / f"{i:02d}-{name}.json").write_text(step.to_json() + "\n", encoding="utf-8")
    out = opts.out or Path(f"{preset}.min.py")
    # the script phase builds its own checkpoint: with the cache visible the reducer would delete the build
    # and leave a script that only runs on this machine
    os.environ.pop("MINREPRO_SCENARIO_CACHE", None)
    summary = reduce_script(ReduceOptions(**{**opts.__dict__, "script": final, "out": out, "workdir": workdir / "script"}), log)
    if keep_steps:
        (steps_dir / f"{len(trip.steps):02d}-script-reducer.py").write_text(Path(summary.output).read_text(), encoding="utf-8")
    return trip, summary
