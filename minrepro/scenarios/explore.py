"""`minrepro explore`: search the scenario space for failures nobody has reported, classify each against the
catalog, reduce the new ones.

Hypothesis generates the specs (`strategies.scenarios`), `jobs` per example so that they run side by side, and is
steered by `target()` toward the branches the presets missed: quantized weights under offload hooks (PEFT's
redispatch, or the script's own `dispatch_model`), maps over many devices. Every run is one rendered script,
traced; what it ended with is judged by the oracles:

  library error   an exception whose raising frame is in a library (type, message and owner: its signature)
  crash           a signal, CUDA error, OOM or timeout
  placement       logits of a split/offloaded load differ from a one-device load of the same checkpoint
                  (beyond a tolerance calibrated on an unquantized control), or come back on another device
  merge           merged output differs from the adapter's (same calibration)
  files           loading rewrote the checkpoint on disk
  round-trip      save_pretrained wrote another adapter than the one loaded

A failure is *known* when a catalog case's signature regex matches its final line and the case's owner is one of
its library frames, or a refusal by design when a library rejects, as documented, what the spec asked for
(`refusals.py`); otherwise it is new, grouped by signature, and (with `reduce`) reduced by the scenario passes
and the differential script reducer into a candidate catalog case. Runs are cached by rendering, and hypothesis'
database keeps its targeted examples: a second run with the same seed and workdir resumes.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable

from ..catalog.manifest import Case, Catalog
from ..harness.placement import dispatch_calls
from ..harness.runner import RunResult
from ..harness.signature import Signature
from .refusals import REFUSAL, refusal_of
from .diagnosed import DIAGNOSED, diagnosed_of
from .withdrawn import HARNESS_FIXES, WITHDRAWN, withdrawn_of
from .render import render
from .spec import PlacementSpec, Scenario, scaled
from .table import adapter_dispatch, digest, prebuild, run_rendered, use_checkpoint_cache
import contextlib

# Oracle violations are assertions the rendering adds; their messages say which oracle spoke.
ORACLES = {
    "placement": r"placement changes the logits|^AssertionError: logits on",
    "merge": r"merge into 4-bit diverges",
    "files": r"rewrote the base checkpoint",
    "round-trip": r"save_pretrained wrote another adapter",
}
CRASH_KINDS = ("signal", "timeout", "cuda-error", "oom", "exit")
TOLERANCE_FLOOR, TOLERANCE_FACTOR = 0.05, 3.0


def oracle_of(sig: Signature | None, headline: str) -> str | None:
    """Which oracle a run's end falls under (None: it passed, or failed in a way no oracle claims)."""
    if sig is None:
        return None
    if sig.kind in CRASH_KINDS:
        return "crash"
    if sig.raised_by == "script" and sig.type == "AssertionError":
        return next((name for name, rx in ORACLES.items() if re.search(rx, headline)), None)
    return "library error" if sig.raised_by == "library" else None


def known_case(sig: Signature, headline: str, catalog: Catalog) -> str | None:
    """The catalog case this failure is, by signature regex and owner (an owner among its library frames)."""
    frames = {str(f) for f in sig.frames} | {str(f.plain()) for f in sig.frames}
    for case in catalog.cases:
        if re.search(case.signature, headline) and (case.owner is None or case.owner in frames):
            return case.id
    return None


def identify(sig: Signature, headline: str, spec: dict, catalog: Catalog) -> str | None:
    """What a failure is: a catalog case's id, a documented refusal's (`refusal:<id>`), or None (new)."""
    return known_case(sig, headline, catalog) or refusal_of(sig, headline, spec)


def group_key(sig: Signature) -> str:
    """Findings group by signature origin: type, message, owner, raiser (call paths above it may differ)."""
    return f"{sig.type}: {sig.message} @ {sig.owner} ({sig.raised_by})"


@dataclass
class Run:
    spec: dict
    digest: str
    oracle: str | None
    headline: str
    signature: dict | None
    known: str | None
    seconds: float
    peft_map: dict[str, int]
    offloaded_quantized: int
    base_map: dict[str, int]

    @property
    def finding(self) -> bool:
        return self.oracle is not None


def summarize(spec: Scenario, result: RunResult, catalog: Catalog) -> Run:
    sig = result.signature
    headline = result.raw_headline.split("\n", 1)[0]
    calls = dispatch_calls(result.trace)
    adapter = adapter_dispatch(calls) or {}  # the Run's `peft_map` keeps its name: recorded reports use it
    oracle = oracle_of(sig, headline)
    as_dict = json.loads(spec.to_json())
    return Run(
        as_dict,
        digest(render(spec)),
        oracle,
        headline if sig else "pass",
        sig.to_dict() if sig else None,
        identify(sig, headline, as_dict, catalog) if oracle else None,
        round(result.seconds, 1),
        dict(adapter.get("devices", {})),
        int(adapter.get("offloaded_quantized_weights", 0) or 0),
        dict(calls[0].get("devices", {})) if calls else {},
    )


@dataclass
class ExploreOptions:
    python: str
    device: str = "cpu"
    scale: str = "tiny"
    gpus: int = 1
    seconds: float = 600.0
    jobs: int = 1
    timeout: float = 120.0
    seed: int = 0
    max_examples: int = 10_000
    workdir: Path = Path(".")
    namespace: str = "default"  # which built checkpoints this env may share (`table.checkpoint_namespace`)


@dataclass
class Exploration:
    runs: list[Run] = field(default_factory=list)
    calibration: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    earlier: float = 0.0  # seconds spent by earlier runs of this workdir (a resumed report counts them)

    def elapsed(self) -> float:
        return self.earlier + time.monotonic() - self.started

    def groups(self) -> dict[str, list[Run]]:
        out: dict[str, list[Run]] = {}
        for run in self.runs:
            if run.finding:
                out.setdefault(run.known or group_key(Signature.from_dict(run.signature)), []).append(run)
        return out

    def line(self) -> str:
        findings = [r for r in self.runs if r.finding]
        new = {group_key(Signature.from_dict(r.signature)) for r in findings if not r.known}
        known = sorted({r.known for r in findings if r.known})
        spilled = sum(r.offloaded_quantized > 0 for r in self.runs)
        return (
            f"{len(self.runs)} runs, {len(findings)} failing: {len(new)} new signature(s), known "
            f"{', '.join(known) or 'none'}; {spilled} put quantized weights under offload hooks; "
            f"{self.elapsed():.0f} s"
        )


class RunCache:
    """Runs by rendering digest, one JSON line each: what makes a stopped exploration resumable."""

    def __init__(self, path: Path):
        self.path = path
        self.known: dict[str, dict] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                self.known[record["digest"]] = record

    def get(self, key: str) -> Run | None:
        return Run(**self.known[key]) if key in self.known else None

    def put(self, run: Run) -> None:
        self.known[run.digest] = run.__dict__
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(run.__dict__) + "\n")


def gpu_env(slot: int, gpus: int) -> dict[str, str] | None:
    """Spread candidates over the GPUs: slot i sees every GPU, starting from GPU i (its cuda:0), so that the
    cross-device maps (cuda:0 / cuda:1) stay possible while the load is shared."""
    if gpus <= 1:
        return None
    order = [(slot + k) % gpus for k in range(gpus)]
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, order))}


def controls(opts: ExploreOptions) -> dict[str, Scenario]:
    """Unquantized controls for the logits oracles: a split load against a one-device load, a merge against the
    adapter."""
    home = 0 if opts.device == "cuda" else "cpu"
    # a split every set loads: a text layer on cpu behind a GPU; on a CPU box the (tied, unquantized) lm_head on disk
    split = {"": 0, "model.language_model.layers.1": "cpu"} if opts.device == "cuda" else {"": "cpu", "lm_head": "disk"}
    controls = {
        "placement": Scenario(
            "control-placement",
            quant=None,
            placement=PlacementSpec(split, offload_folder=True),
            action="placement",
            tolerance=1e9,
        ),
        "merge": Scenario(
            "control-merge",
            quant=None,
            placement=PlacementSpec({"": home} if home == 0 else "cpu"),
            action="parity",
            tolerance=1e9,
        ),
    }
    return {name: scaled(spec, opts.scale) for name, spec in controls.items()}


def calibrate(specs: dict[str, Scenario], run_one: Callable[[Scenario, int], RunResult]) -> dict[str, Any]:
    """The tolerance for the logits oracles: the controls' errors times TOLERANCE_FACTOR, never below
    TOLERANCE_FLOOR."""
    measured = {}
    for name, spec in specs.items():
        result = run_one(spec, 0)
        errors = re.findall(r"relative error ([0-9.e+-]+)", result.stdout)
        measured[name] = {
            "error": float(errors[-1]) if errors else None,
            "headline": result.raw_headline.split("\n")[0],
        }
    worst = max([m["error"] for m in measured.values() if m["error"] is not None] or [0.0])
    return {
        "controls": measured,
        "tolerance": max(TOLERANCE_FLOOR, TOLERANCE_FACTOR * worst),
        "key": calibration_key(specs),
    }


def calibration_key(specs: dict[str, Scenario]) -> str:
    return digest(json.dumps([render(s) for s in specs.values()] + [TOLERANCE_FLOOR, TOLERANCE_FACTOR]))


def explore(
    opts: ExploreOptions,
    catalog: Catalog,
    log: Callable[[str], None],
    on_batch: Callable[[Exploration], None] = lambda _: None,
) -> Exploration:
    """Search until `opts.seconds` are spent; `on_batch` sees the state after every batch (a run killed from
    outside keeps the report written there)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings, target
    from hypothesis import strategies as st
    from hypothesis.database import DirectoryBasedExampleDatabase

    from .strategies import scenarios

    opts.workdir.mkdir(parents=True, exist_ok=True)
    (opts.workdir / "runs").mkdir(exist_ok=True)
    cache = RunCache(opts.workdir / "runs.jsonl")
    state, elapsed_file = Exploration(), opts.workdir / "elapsed.json"
    if elapsed_file.is_file():
        state.earlier = json.loads(elapsed_file.read_text(encoding="utf-8"))["seconds"]
    # tiny checkpoints are built by each run in its own scratch (the files oracle needs a checkpoint of its own);
    # at release scale they are shared (an E2B build takes a minute)
    if opts.scale == "tiny":
        os.environ.pop("MINREPRO_SCENARIO_CACHE", None)
    else:
        use_checkpoint_cache(opts.namespace)

    def run_one(spec: Scenario, slot: int) -> RunResult:
        env = gpu_env(slot, opts.gpus)
        prebuild(spec, opts.workdir / "runs", opts.python)
        return run_rendered(render(spec), opts.workdir / "runs", opts.python, opts.timeout, env)

    calibration_file, specs = opts.workdir / "calibration.json", controls(opts)
    if calibration_file.is_file():  # measured by an earlier run of the same controls: resume with it
        state.calibration = json.loads(calibration_file.read_text(encoding="utf-8"))
    if state.calibration.get("key") != calibration_key(specs):
        state.calibration = calibrate(specs, run_one)
        calibration_file.write_text(json.dumps(state.calibration, indent=1) + "\n", encoding="utf-8")
    tolerance = state.calibration["tolerance"]
    log(f"calibration: {json.dumps(state.calibration['controls'])}; tolerance {tolerance:.3f}")

    def judge(spec: Scenario, slot: int) -> Run:
        key = digest(render(spec))
        cached = cache.get(key)
        if cached is not None:
            return cached
        run = summarize(spec, run_one(spec, slot), catalog)
        cache.put(run)
        return run

    # a resumed exploration reports what it ran before too (hypothesis replays those draws from the cache)
    # (only runs of what the spec renders to now: a run of an older rendering is not this exploration's)
    state.runs = [run for run in map(lambda record: Run(**record), cache.known.values()) if _current(run)]
    seen = {run.digest for run in state.runs}
    deadline = time.monotonic() + opts.seconds  # the calibration is not the search
    strategy = scenarios(opts.device, opts.scale, opts.gpus).map(lambda s: replace(s, tolerance=tolerance))

    @seed(opts.seed)
    @settings(
        database=DirectoryBasedExampleDatabase(str(opts.workdir / "hypothesis")),
        max_examples=opts.max_examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
    )
    @given(st.data())
    def search(data: st.DataObject) -> None:
        batch = [data.draw(strategy) for _ in range(opts.jobs)]  # before the check: a replay must draw alike
        if time.monotonic() > deadline:
            raise OutOfTime  # the only way to end a hypothesis run early; caught below, never a finding
        with ThreadPoolExecutor(opts.jobs) as pool:
            runs = list(pool.map(judge, batch, range(opts.jobs)))
        for run in runs:  # a batch may draw one spec twice: one run (the cache keeps one too)
            if run.digest not in seen:
                state.runs.append(run)
                seen.add(run.digest)
        # steer toward the branches presets missed: quantized weights under offload hooks, many devices
        target(float(max(r.offloaded_quantized for r in runs)), label="quantized weights under offload hooks")
        target(float(max(len(r.peft_map) + len(r.base_map) for r in runs)), label="devices in the maps")
        target(float(max(r.peft_map.get("disk", 0) for r in runs)), label="modules PEFT's redispatch put on disk")
        elapsed_file.write_text(json.dumps({"seconds": round(state.elapsed(), 1)}) + "\n", encoding="utf-8")
        log(state.line())
        on_batch(state)

    with contextlib.suppress(OutOfTime):
        search()
    return state


def _current(run: Run) -> bool:
    """Whether a cached run is of what its spec renders to now (a spec that no longer renders is not)."""
    try:
        return digest(render(Scenario.from_json(json.dumps(run.spec)))) == run.digest
    except ValueError:
        return False


class OutOfTime(Exception):
    """The search's time budget is spent."""


# --- the report -----------------------------------------------------------------------------------------


def reduction_order(key: str, runs: list[Run]) -> tuple:
    """Which new findings to reduce first: oracle violations and crashes, then library errors other than a
    ValueError (often a deliberate refusal of a config), the most frequent first."""
    sig = Signature.from_dict(runs[0].signature)
    return (runs[0].oracle == "library error", sig.type == "ValueError", -len(runs), key)


def smallest(runs: list[Run]) -> Run:
    """The finding's simplest witness: the fewest rendered lines."""
    return min(runs, key=lambda r: (len(render(Scenario.from_json(json.dumps(r.spec))).splitlines()), r.digest))


def report_doc(state: Exploration, opts: ExploreOptions, versions: dict, reductions: dict[str, dict]) -> dict:
    groups = []
    for key, runs in state.groups().items():
        witness = smallest(runs)
        groups.append(
            {
                "key": key,
                "known": witness.known,
                "oracle": witness.oracle,
                "count": len(runs),
                "headline": witness.headline,
                "witness": witness.__dict__,
                "reduction": reductions.get(key),
            }
        )
    groups.sort(key=lambda g: (g["known"] is not None, -g["count"]))
    return {
        "device": opts.device,
        "scale": opts.scale,
        "gpus": opts.gpus,
        "seed": opts.seed,
        "jobs": opts.jobs,
        "harness_fixes": [fix.id for fix in HARNESS_FIXES],
        "seconds": round(state.elapsed()),
        "versions": versions,
        "calibration": state.calibration,
        "runs": len(state.runs),
        "passing": sum(r.headline == "pass" for r in state.runs),
        "reached_offloaded_quantized": sum(r.offloaded_quantized > 0 for r in state.runs),
        # a run no oracle claims either passed or ended otherwise (the script's own error): never counted as passed
        "by_oracle": _count(r.oracle or ("pass" if r.headline == "pass" else "unclaimed") for r in state.runs),
        "groups": groups,
        # every run, compactly: what was covered, so that "not found" can be read as "tried N times"
        "every_run": [
            {
                "spec": _brief(r.spec),
                "end": r.headline[:100],
                "known": r.known,
                "peft_map": r.peft_map,
                "base_map": r.base_map,
                "offloaded_quantized": r.offloaded_quantized,
            }
            for r in state.runs
        ],
    }


def _brief(spec: dict) -> str:
    q = spec.get("quant")
    quant = (
        "bf16" if not q else ("int8" if q["load_in_8bit"] else f"{q['quant_type']}{'+dq' if q['double_quant'] else ''}")
    )
    quant += "+fp32off" if q and q["fp32_cpu_offload"] else ""
    return (
        f"{quant} map={json.dumps(spec['placement']['device_map'])} mm={json.dumps(spec['placement']['max_memory'])} "
        f"{spec['peft']['call']}{json.dumps(spec['peft']['kwargs'])} {spec['action']}"
    )


def _gpus(doc: dict) -> str:
    # a CPU exploration records gpus=1 (the option's default); it used none
    return f", {doc['gpus']} GPU(s)" if doc["device"] == "cuda" else ""


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def report_markdown(doc: dict) -> str:
    lines = [
        f"## explore: {doc['device']}, {doc['scale']}{_gpus(doc)}, seed {doc['seed']}",
        "",
        f"{doc['runs']} runs in {doc['seconds']} s; {doc['passing']} passed; "
        f"{doc['reached_offloaded_quantized']} put quantized weights under offload hooks (PEFT's redispatch or the "
        "script's own dispatch_model). "
        f"Versions: {', '.join(f'{k} {v}' for k, v in doc['versions'].items())}. Logits tolerance "
        f"{doc['calibration'].get('tolerance', 0):.3f} (unquantized controls: "
        + ", ".join(f"{k} {v['error']}" for k, v in doc["calibration"].get("controls", {}).items())
        + ").",
        "",
        "| oracle | finding | catalog | runs | reduced repro |",
        "|---|---|---|---|---|",
    ]
    for g in doc["groups"]:
        red = g.get("reduction") or {}
        cell = f"`{red['script']}` ({red['lines']} lines)" if red.get("script") else red.get("error", "")
        lines.append(
            f"| {g['oracle']} | {g['headline'][:110].replace('|', '/')} | {g['known'] or '**new**'} | "
            f"{g['count']} | {cell} |"
        )
    return "\n".join(lines) + "\n"


# --- new findings into candidate catalog cases ------------------------------------------------------------


def slug(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key.split(" @ ")[0].lower()).strip("-")[:48]


def candidate_entry(case: Case, outcomes: dict[str, str]) -> str:
    """The manifest entry a maintainer of the catalog would paste (family left to name)."""
    lines = [
        "[[case]]",
        f'id = "{case.id}"',
        f'script = "{case.script.name}"',
        'family = "?"',
        f'device = "{case.device}"',
        f"signature = {json.dumps(case.signature)}",
    ]
    if case.owner:
        lines.append(f'owner = "{case.owner}"')
    lines += [f'{name} = "{outcome}"' for name, outcome in outcomes.items()]
    lines += ["fixed_in = []", "upstream = []", 'notes = "found by minrepro explore"']
    return "\n".join(lines) + "\n"


# --- the README's summary of every recorded exploration ---------------------------------------------------

BEGIN = (
    "<!-- explore:begin (generated by `minrepro explore --readme docs/explore.md` from results/explore; "
    "do not edit) -->"
)
END = "<!-- explore:end -->"


def summary(directory: Path, catalog: Catalog) -> str:
    """One table over every report.json under `directory`: per exploration (device, scale, GPUs, set), what each
    oracle found, the catalog family it is or "new", in how many runs, and whether it was reduced."""
    families = {case.id: case.family for case in catalog.cases}
    lines = [
        "A family marked * was new when its exploration ran and has been catalogued since (same signature rule). "
        "A refusal by design is a library rejecting what the spec asked for, as documented "
        "(`minrepro/scenarios/refusals.py` says which and why); it is not a finding. A withdrawn finding was "
        'the harness\'s error, in a rendering fixed since (`minrepro/scenarios/withdrawn.py`). "By diagnosis": '
        "another signature, whose cause was read on the failing run and is a catalogued family "
        "(`minrepro/scenarios/diagnosed.py` says what was seen and what was not run).",
        "",
        "| exploration | runs (passed; reached offloaded 4-bit) | oracle | finding | family | runs | reduced |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(directory.glob("*/report.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        where = f"{doc['device']}/{doc['scale']}{_gpus(doc)}, {doc.get('set', '?')}{unpatched_note(doc, catalog)}"
        total = f"{doc['runs']} ({doc['passing']}; {doc['reached_offloaded_quantized']})"
        for i, g in enumerate(doc["groups"]):
            cell = reduction_cell(g.get("reduction") or {})
            case = attributed_case(g, doc, path.parent.name, catalog)
            family = _family_cell(case, g["known"], families)
            lines.append(
                f"| {where if i == 0 else ''} | {total if i == 0 else ''} | {g['oracle']} | "
                f"{g['headline'][:90].replace('|', '/')} | {family} | {g['count']} | {cell} |"
            )
    return "\n".join(lines)


def attributed_case(group: dict, doc: dict, exploration: str, catalog: Catalog) -> str | None:
    """What a finding is: its case then or now (same signature rule), a refusal, our withdrawn error, or a diagnosis."""
    return group["known"] or known_now(group, catalog) or withdrawn_of(group, doc) or diagnosed_of(exploration, group)


def findings_of(case_id: str, directory: Path, catalog: Catalog) -> list[dict]:
    """The explored findings that are this case: by its signature, or by a recorded diagnosis (`how` says which)."""
    found = []
    for path in sorted(directory.glob("*/report.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for group in doc["groups"]:
            case = attributed_case(group, doc, path.parent.name, catalog) or ""
            if case.removeprefix(DIAGNOSED) == case_id:
                found.append(
                    {
                        "exploration": path.parent.name,
                        "where": f"{doc['device']}/{doc['scale']}{_gpus(doc)}",
                        "set": doc.get("set", "?"),
                        "headline": group["headline"],
                        "runs": group["count"],
                        "how": "by diagnosis" if case.startswith(DIAGNOSED) else "same signature",
                        "spec": _brief(spec) if (spec := group.get("witness", {}).get("spec")) else "",
                    }
                )
    return found


def _family_cell(case: str | None, known_then: str | None, families: dict[str, str]) -> str:
    if not case:
        return "**new**"
    if case.startswith(REFUSAL):
        return f"refusal by design ({case.removeprefix(REFUSAL)})"
    if case.startswith(WITHDRAWN):
        return f"withdrawn: our error ({case.removeprefix(WITHDRAWN)})"
    if case.startswith(DIAGNOSED):  # another signature: the cause was read on the run (minrepro/scenarios/diagnosed.py)
        case = case.removeprefix(DIAGNOSED)
        return f"new; by diagnosis: {families.get(case, '?')} ({case})"
    return f"{families.get(case, '?')} ({case}){'' if known_then else ' *'}"


def reduction_cell(red: dict) -> str:
    """What the README says of a finding's reduction: its size, or why there is none, in a few words."""
    if red.get("script"):
        return f"{red['lines']} lines"
    error = red.get("error", "")
    if not red:
        return "no"
    if so_far := re.search(r"best script so far \((\d+) code lines", error):
        return f"stopped at {so_far[1]} lines, unverified"
    return "no: flaky" if "fails flakily" in error else error.removeprefix("not reduced: ")[:40]


def known_now(group: dict, catalog: Catalog) -> str | None:
    """The case a finding that was new when its exploration ran is today (catalogued since), by the same rule."""
    witness = group.get("witness", {})
    sig = witness.get("signature")
    return (
        identify(Signature.from_dict(sig), group["headline"], witness.get("spec") or {}, catalog)
        if sig and group["oracle"]
        else None
    )


def unpatched_note(doc: dict, catalog: Catalog) -> str:
    """An exploration of a patched env (known families fixed, so they stop masking what lies behind them) says
    which families were left unpatched."""
    from ..envs.patching import needed, patch_id

    applied = {patch_id(rel) for rel in doc.get("patches") or []}
    if not applied:
        return ""
    # a family fixed in the explored set's releases (declared "pass" there) masks nothing: not "left unpatched"
    left = sorted(
        {
            c.family
            for c in catalog.cases
            if c.patches
            and c.declared(doc.get("set", "")) != "pass"
            and not set(needed(catalog, c, doc.get("set", ""))) <= applied
        }
    )
    return f", patched (left unpatched: {', '.join(left) or 'none'})"
