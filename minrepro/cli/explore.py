"""`minrepro explore`: search scenario specs for failures, classify them against the catalog, reduce the new ones."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..catalog.manifest import Case, Catalog, check_case, load_catalog
from ..catalog.run import observe
from ..catalog.targets import headline_regex
from ..dirs import cache, scrubbed, without_local_paths
from ..envs.venvs import env_of, read_marker
from ..errors import MinreproError
from ..scenarios.table import checkpoint_namespace
from ..harness.probe import probe
from ..harness.signature import Signature
from ..harness.runner import resolve_python, run_script
from .common import progress as _progress

if TYPE_CHECKING:
    from ..scenarios.explore import ExploreOptions


@dataclass(frozen=True)
class ExploredEnv:
    """The environment the scenarios run in: its python, the version set it matches, its patches and versions."""

    python: str
    set_name: str
    patches: list[str]
    versions: dict[str, Any]


@dataclass(frozen=True)
class FindingReductions:
    """How the new findings are reduced: with the exploration's python, device, jobs and workdir (`opts`), judged
    against `catalog`, the candidates written under `results`, each reduction given `seconds` (None: no limit)."""

    opts: ExploreOptions
    catalog: Catalog
    results: Path
    seconds: float | None


def cmd_explore(args: argparse.Namespace) -> int:
    from ..scenarios import explore as ex

    if args.readme:  # no search: the README's table from the recorded explorations
        from ..catalog.matrix import replace_block

        readme = Path(args.readme)
        text = replace_block(
            readme,
            readme.read_text(encoding="utf-8"),
            ex.summary(Path(args.source), load_catalog(args.manifest)),
            ex.BEGIN,
            ex.END,
        )
        if args.check and text != readme.read_text(encoding="utf-8"):
            raise MinreproError(f"{readme}'s explore table is stale: run `minrepro explore --readme {readme}`")
        if not args.check:
            readme.write_text(text, encoding="utf-8")
        return 0
    bad_budget = args.reduce_seconds is not None and args.reduce_seconds <= 0
    if args.jobs < 1 or args.gpus < 1 or args.seconds <= 0 or bad_budget:
        raise MinreproError("--jobs and --gpus must be at least 1, --seconds and --reduce-seconds positive")
    if args.device == "cpu" and args.gpus > 1:
        raise MinreproError("--gpus needs --device cuda")
    python = resolve_python(args.python)
    env = probe(python)
    catalog = load_catalog(args.manifest)
    set_name = catalog.detect_set(env.versions) or "custom"
    if args.device == "cuda" and not env.gpu:
        raise MinreproError(f"--device cuda, but {python} sees no GPU")
    patches = (read_marker(env_of(python)) or {}).get("patches", [])
    if args.reduce_only:
        return _reduce_recorded(args, ExploredEnv(python, set_name, patches, env.versions), catalog)
    workdir = (
        Path(args.workdir)
        if args.workdir
        else cache("explore", f"{args.device}-{args.scale}-{set_name}-seed{args.seed}")
    )
    opts = ex.ExploreOptions(
        python=python,
        device=args.device,
        scale=args.scale,
        gpus=args.gpus,
        seconds=args.seconds,
        jobs=args.jobs,
        timeout=args.timeout,
        seed=args.seed,
        max_examples=args.max_examples,
        workdir=workdir,
        namespace=checkpoint_namespace(env.versions, patches),
    )
    _progress(
        f"exploring {args.device}/{args.scale} on {set_name} for {args.seconds:.0f} s, {args.jobs} at a time "
        f"(state in {workdir}; run again to resume)"
    )
    results = Path(args.results or f".minrepro/results/explore/{args.device}-{args.scale}-{set_name}")
    results.mkdir(parents=True, exist_ok=True)
    reductions: dict[str, dict] = {}
    current = [ex.Exploration()]

    def write(state: ex.Exploration | None = None) -> dict:
        """After every batch and every reduction: a run stopped from outside keeps its report."""
        state = current[0] = state or current[0]
        return _write_report(
            results, {**ex.report_doc(state, opts, env.versions, reductions), "set": set_name, "patches": patches}
        )

    state = ex.explore(opts, catalog, _progress, on_batch=write)
    write(state)
    new = sorted(
        ((key, runs) for key, runs in state.groups().items() if not runs[0].known),
        key=lambda item: ex.reduction_order(*item),
    )
    reducing = FindingReductions(opts, catalog, results, args.reduce_seconds)
    for key, runs in new[: args.reduce]:
        reductions[key] = _reduce_finding(key, ex.smallest(runs), reducing)
        write()
    print(ex.report_markdown(write()))
    print(f"report: {results / 'report.md'}")
    return 0


def _reduce_recorded(args: argparse.Namespace, env: ExploredEnv, catalog) -> int:
    """No search: reduce the findings a recorded report left unreduced that are still new (its search ran out of
    its time, or ran with `--reduce 0`), most important first, in an env like the one it explored; the report is
    rewritten after each, so a stopped run keeps what it reduced."""
    from ..scenarios import explore as ex

    if not args.results or not (Path(args.results) / "report.json").is_file():
        raise MinreproError("--reduce-only needs --results, the folder of a recorded report.json")
    results = Path(args.results)
    doc = json.loads((results / "report.json").read_text(encoding="utf-8"))
    python, set_name, patches = env.python, env.set_name, env.patches
    if (doc.get("set"), sorted(doc.get("patches", []))) != (set_name, sorted(patches)):
        raise MinreproError(
            f"{results} was explored on {doc.get('set')} with {len(doc.get('patches', []))} patch(es); "
            f"{python} is {set_name} with {len(patches)}: give --python an env like the report's"
        )
    workdir = Path(args.workdir) if args.workdir else cache("explore", f"reduce-{results.name}")
    opts = ex.ExploreOptions(
        python=python,
        device=doc["device"],
        scale=doc["scale"],
        gpus=doc["gpus"],
        jobs=args.jobs,
        timeout=args.timeout,
        workdir=workdir,
        namespace=checkpoint_namespace(env.versions, patches),
    )
    # still new today: a finding catalogued since it was recorded is a known family now (the README's rule), and one
    # that was the harness's own error is withdrawn
    todo = [
        g
        for g in doc["groups"]
        if not g["known"]
        and not ex.known_now(g, catalog)
        and not ex.withdrawn_of(g, doc)
        and not (g.get("reduction") or {}).get("script")
    ]
    todo.sort(key=lambda g: ex.reduction_order(g["key"], [ex.Run(**g["witness"])] * g["count"]))
    reducing = FindingReductions(opts, catalog, results, args.reduce_seconds)
    for group in todo[: args.reduce]:
        group["reduction"] = _reduce_finding(group["key"], ex.Run(**group["witness"]), reducing)
        _write_report(results, doc)
    print(ex.report_markdown(doc))
    return 0


def _write_report(results: Path, doc: dict) -> dict:
    from ..scenarios import explore as ex

    recorded = scrubbed(doc)  # the report is read on other machines: no path of this one
    (results / "report.json").write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    (results / "report.md").write_text(ex.report_markdown(recorded), encoding="utf-8")
    return doc


def _reduce_finding(key: str, witness, reducing: FindingReductions) -> dict:
    """Reduce one new finding (spec passes, then the guarded script reducer) into a candidate catalog case:
    the reduced script, its minimal spec, a manifest entry with outcomes measured on every set env at hand, and
    the catalog's own checks of it."""
    from ..reduction.options import ReduceOptions
    from ..scenarios import explore as ex
    from ..scenarios.reduce import ScenarioTarget, reduce_spec, steps_file_of
    from ..scenarios.spec import Scenario

    opts, catalog = reducing.opts, reducing.catalog
    name = ex.slug(key)
    folder = reducing.results / "candidates"
    folder.mkdir(exist_ok=True)
    spec = Scenario.from_json(json.dumps(witness.spec))
    (folder / f"{name}.spec.json").write_text(spec.to_json() + "\n", encoding="utf-8")
    out = folder / f"{name}.min.py"
    _progress(f"reducing new finding {key}")
    try:
        trip, summary = reduce_spec(
            spec,
            ScenarioTarget(f"explore-{name}", opts.scale, opts.device),
            ReduceOptions(
                script=Path("-"),
                out=out,
                python=opts.python,
                jobs=opts.jobs,
                timeout=opts.timeout,
                workdir=opts.workdir / "reductions" / name,
                max_seconds=reducing.seconds,
            ),
            keep_steps=True,
            log=_progress,
        )
    except MinreproError as exc:  # a finding that does not reduce is still a finding: say why in the report
        return {"error": f"not reduced: {exc}", "spec": str(folder / f"{name}.spec.json")}
    sig = Signature.from_dict(witness.signature)
    owner = str(sig.owner) if sig.raised_by == "library" and sig.owner else None
    # the rule a user's script gets: the final line literal, numbers (and a missing key) free
    case = Case(
        id=name,
        script=out,
        family="?",
        device=opts.device,
        signature=headline_regex(witness.headline),
        outcomes={},
        fixed_in=(),
        upstream=(),
        owner=owner,
    )
    outcomes, others = _outcomes(case, catalog, opts.timeout)
    case = replace(case, outcomes={"pinned": "pass", "newest": "pass", **outcomes})
    entry = ex.candidate_entry(case, outcomes)
    (folder / f"{name}.case.toml").write_text(without_local_paths(entry), encoding="utf-8")
    return {
        "script": str(out),
        "lines": summary.output_lines,
        "spec": str(folder / f"{name}.spec.json"),
        "steps": str(steps_file_of(out.resolve())),
        "spec_steps": [n for n, _, _ in trip.steps[1:]],
        "guard": summary.guard,
        "outcomes": outcomes,
        "other_failures": others,
        "catalog_checks": check_case(case, catalog) or "ok",
        "replay": f"minrepro scenario render --spec {folder / f'{name}.spec.json'} > replay.py && "
        f"minrepro check replay.py --set {next(iter(outcomes), 'pinned')}",
    }


def _outcomes(case: Case, catalog, timeout: float) -> tuple[dict[str, str], dict[str, str]]:
    """fail / fail-other / pass of the candidate case on each version set whose env exists in the cache, judged as
    the catalog judges its cases; and, per set where it failed otherwise, that failure's final line and why it is
    another (a "fail-other" alone said nothing of what the two-GPU rows met on the other sets)."""
    found, others = {}, {}
    for name in catalog.sets:
        python = cache("envs", name, "bin", "python")
        if python.is_file():
            run = run_script(case.script, python=str(python), timeout=timeout, isolated=True)
            found[name], why = observe(case, run)
            if found[name] == "fail-other":
                others[name] = f"{(run.raw_headline.splitlines() or [''])[0][:200]} ({why})"
    return found, others


def register(sub: argparse._SubParsersAction) -> None:
    explore = sub.add_parser(
        "explore", help="search scenario specs for unreported failures; reduce the new ones", description=__doc__
    )
    explore.add_argument("--python", help="interpreter whose environment runs the scenarios (default: this one)")
    explore.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="placements over this box's devices")
    explore.add_argument("--scale", default="tiny", choices=["tiny", "e2b", "e4b"], help="model dimensions")
    explore.add_argument(
        "--gpus",
        type=int,
        default=1,
        help="GPUs to use: runs are spread over them and maps may name each (cuda:0 / cuda:1 / cpu / disk)",
    )
    explore.add_argument("--seconds", type=float, default=600, help="search time budget (reductions come after)")
    explore.add_argument("--jobs", type=int, default=1, help="scenarios run side by side (per example)")
    explore.add_argument("--timeout", type=float, default=120, help="seconds per scenario run")
    explore.add_argument("--seed", type=int, default=0, help="hypothesis seed (same seed and workdir: resume)")
    explore.add_argument("--max-examples", type=int, default=10_000, help="hypothesis examples at most")
    explore.add_argument("--reduce", type=int, default=3, help="reduce at most this many new findings (0: none)")
    explore.add_argument(
        "--reduce-seconds",
        type=float,
        help="time budget per finding's reduction (spec passes and "
        "script; the best so far is verified and recorded, marked not minimal)",
    )
    explore.add_argument(
        "--reduce-only",
        action="store_true",
        help="no search: reduce the new findings the "
        "recorded report in --results left unreduced (--python: an env of its set and patches)",
    )
    explore.add_argument("--workdir", help="state: runs, hypothesis database, calibration (default: in the cache)")
    explore.add_argument(
        "--results",
        help="where report.md/json and candidate cases go (default: .minrepro/results/explore/DEVICE-SCALE-SET)",
    )
    explore.add_argument(
        "--readme", help="no search: write the table of every recorded exploration into this README's explore block"
    )
    explore.add_argument("--from", dest="source", default="results/explore", help="--readme: the recorded explorations")
    explore.add_argument("--check", action="store_true", help="--readme: fail if the block is not up to date")
    explore.set_defaults(func=cmd_explore)
