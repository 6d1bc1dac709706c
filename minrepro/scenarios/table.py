"""Running scenarios: a rendering is written under its content hash and run with the placement trace on, its
checkpoint built first (outside the timed run) and shared per interpreter; `scenario_table` runs presets into
rows that say what each hit *and which branch it exercised* (the device map each dispatch inferred, the
quantized weights it put under offload hooks)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from ..dirs import cache
from ..harness.placement import dispatch_calls
from ..harness.runner import RunResult, run_script, traceback_tail
from .presets import presets
from .render import BUILT, checkpoint_key, render, render_build
from .spec import SEEDS_INNER_LINEAR, Scenario

BUILD_TIMEOUT = 1800.0  # an E2B/E4B checkpoint build; a build killed at a candidate's timeout never completes
CHECKPOINT_ENV = "MINREPRO_SCENARIO_CACHE"


def digest(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()[:16]


def write_rendered(source: str, directory: Path) -> Path:
    """One rendered scenario, under its content hash."""
    path = directory / f"{digest(source)}.py"
    path.write_text(source, encoding="utf-8")
    return path


def run_rendered(
    source: str, directory: Path, python: str, timeout: float, env: dict[str, str] | None = None
) -> RunResult:
    """Write one rendered scenario and run it, traced (the checkpoint cache is whatever MINREPRO_SCENARIO_CACHE
    says in this process; `env` adds variables, e.g. which GPUs it sees)."""
    return run_script(write_rendered(source, directory), python=python, timeout=timeout, trace=True, env=env)


def prebuild(spec: Scenario, directory: Path, python: str) -> float:
    """Build the spec's checkpoint into the shared cache before its timed run (the build is not the bug).
    A build that fails is left to the timed run, which meets the same error and records it."""
    source = render_build(spec)
    shared = os.environ.get(CHECKPOINT_ENV)
    # built already, by some release (the run's own folder is keyed on its versions: at worst the run builds it)
    if source is None or (shared and any((Path(shared) / checkpoint_key(spec)).glob(f"*/{BUILT}"))):
        return 0.0  # cheap enough to build in the run, or built already (a process start and its imports saved)
    return run_rendered(source, directory, python, BUILD_TIMEOUT).seconds


def checkpoint_namespace(versions: dict[str, str | None], patches: list[str]) -> str:
    """Which environments may share built checkpoints: those that save them alike, i.e. the same transformers and
    peft releases. An E4B checkpoint is 18 GB: one per namespace, not one per env. Patches to peft or
    transformers get a namespace of their own only for adapters whose build they change (`checkpoint_key`)."""
    return f"transformers-{versions.get('transformers')}_peft-{versions.get('peft')}"


def spec_namespace(namespace: str, patches: list[str], spec: Scenario) -> str:
    """The namespace a spec's checkpoint lives in: a patched peft builds an adapter with targets other than the
    seeds' inner-linear regex differently (unpatched, broad targets cannot even be built), so those get their own."""
    touched = sorted(p for p in patches if p.split("/", 1)[0] in ("peft", "transformers"))
    if not touched or spec.adapter.targets == SEEDS_INNER_LINEAR:
        return namespace
    return namespace + "_" + hashlib.sha1(" ".join(touched).encode()).hexdigest()[:8]


def use_checkpoint_cache(namespace: str) -> None:
    """Share built checkpoints between runs of environments in one namespace (`checkpoint_namespace`)."""
    os.environ[CHECKPOINT_ENV] = str(cache("scenario-checkpoints", namespace))


def peft_dispatch(calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The redispatch PEFT made (load_adapter), if it made one."""
    return next((c for c in reversed(calls) if c.get("caller", "").startswith("peft.")), None)


def adapter_dispatch(calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The dispatch of the LoRA-wrapped model: PEFT's redispatch, or else the script's own `dispatch_model` call (the
    base load's dispatch is transformers')."""
    own = (c for c in reversed(calls) if not c.get("caller", "").startswith(("transformers.", "accelerate.")))
    return peft_dispatch(calls) or next(own, None)


def reached_offloaded_quantized(calls: list[dict[str, Any]]) -> bool:
    """Whether PEFT's redispatch put quantized weights under offload hooks: where families A and B live."""
    call = peft_dispatch(calls)
    return bool(call and call.get("offloaded_quantized_weights", 0) > 0)


def describe_placement(calls: list[dict[str, Any]]) -> str:
    """'peft map: 0×12, cpu×28, disk×25 (4-bit offloaded: 212; dispatch failed)' for a table cell."""
    call = peft_dispatch(calls)
    if call is None:
        return "no PEFT redispatch" + (f" (base: {_devices(calls[0])})" if calls else "")
    done = "" if call["status"] == "returned" else "; dispatch raised"
    return (
        f"peft map: {_devices(call)}, main {call.get('main_device')} (quantized offloaded: "
        f"{call.get('offloaded_quantized_weights', '?')}{done})"
    )


def _devices(call: dict[str, Any]) -> str:
    return ", ".join(f"{device}×{count}" for device, count in call.get("devices", {}).items()) or "empty"


@dataclass(frozen=True)
class PresetsAt:
    """The presets a table runs: their names, at `scale` on `device`."""

    names: list[str]
    scale: str
    device: str


@dataclass(frozen=True)
class PresetEnv:
    """Where each preset runs: the env's python, each run's timeout, and the env's checkpoint namespace
    (`checkpoint_namespace`) and patches, which say which built checkpoints it shares."""

    python: str
    timeout: float
    namespace: str = "default"
    patches: list[str] = ()


def scenario_table(
    which: PresetsAt, env: PresetEnv, on_row: Callable[[list[dict]], None], measured: list[dict] = ()
) -> list[dict]:
    """Run each preset once: outcome, signature headline, owner, seconds, placement. `on_row` sees the rows so
    far after every preset (a table cut short keeps what it measured); a preset with a row in `measured` (a
    table cut short before, same environment) keeps that row instead of running again."""
    names, scale, device = which.names, which.scale, which.device
    python, timeout = env.python, env.timeout
    available = presets(device, scale)
    before = {r["preset"]: r for r in measured if r["scale"] == scale and r["device"] == device}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="minrepro-scenarios-") as tmp:
        for name in names:
            if name in before:
                rows.append(before[name])
                continue
            spec = available[name]
            use_checkpoint_cache(spec_namespace(env.namespace, list(env.patches), spec))
            build = prebuild(spec, Path(tmp), python)
            result = run_rendered(render(spec), Path(tmp), python, timeout)
            sig, calls = result.signature, dispatch_calls(result.trace)
            rows.append(
                {
                    "preset": name,
                    "scale": scale,
                    "device": device,
                    "outcome": "fail" if sig else "pass",
                    "headline": result.raw_headline.split("\n", 1)[0],
                    "owner": str(sig.owner) if sig else "",
                    "seconds": round(result.seconds, 1),
                    "build_seconds": round(build, 1),
                    "placement": calls,
                    "reached": reached_offloaded_quantized(calls),
                    "traceback": traceback_tail(result.stderr) if sig else "",
                }
            )
            on_row(rows)
    return rows
