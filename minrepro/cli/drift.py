"""`minrepro drift`: the catalog's cases that run on this machine, its controls and its patch proofs on `latest` (the
index's newest releases, resolved now), compared with what the manifest declares for the `newest` snapshot; a change
that flips a case is bisected over the releases between the two. `--record` keeps the run in results/drift/ and
regenerates the family pages; `--propose` prints the manifest diff that would move the snapshot (never applied).
Exits 1 on any change, 2 where `latest` cannot be resolved (the index out of reach)."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

from packaging.version import Version

from ..catalog.drift import (
    NEWLY_FAILS,
    NOW_PASSES,
    DriftDocument,
    check_patches,
    chooser,
    compare,
    drift_catalog,
    format_report,
    merged,
    proof_status,
    proposal,
)
from ..catalog.manifest import Case, Catalog, load_catalog
from ..catalog.matrix import read_results_file
from ..catalog.run import CaseResult, CaseRuns, check_set, results_document, run_cases, write_results
from ..dirs import cache
from ..envs.latest import LATEST, SNAPSHOT, Resolution, index_releases, newest_final, resolve_latest
from ..envs.venvs import env_python, wheelhouse_from_env
from ..errors import MinreproError
from ..harness.probe import probe
from ..harness.runner import DEFAULT_TIMEOUT
from .common import progress as _progress


def with_latest(catalog: Catalog, names: list[str], wheelhouse: Path | None) -> tuple[Catalog, Resolution | None]:
    """Where `latest` is among the sets named, the catalog with it resolved now (a one-line error offline)."""
    if LATEST not in names or LATEST in catalog.sets:
        return catalog, None
    resolution = resolve_latest(catalog.version_set(SNAPSHOT), wheelhouse)
    _progress(f"latest: {resolution.describe()}")
    return catalog.with_set(resolution.version_set()), resolution


def cmd_drift(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.manifest)
    if args.from_:
        doc = DriftDocument.from_dict(read_results_file(Path(args.from_)))
    else:
        doc = run_drift(catalog, args)
        where = cache("results", "drift", f"{LATEST}-{doc.environment['machine']}.json")
        write_results(where, doc.to_dict())
        _progress(f"kept in {where} (`minrepro drift --from {where}` reports it again, --propose, --record)")
    if args.record:
        _record(catalog, doc, Path(args.results), Path(args.docs), partial=bool(args.cases) and not args.from_)
    if args.propose:
        print(proposal(doc, catalog), end="")
        return 0
    print(format_report(doc, catalog))
    return 1 if doc.changes() else 0


def run_drift(catalog: Catalog, args: argparse.Namespace) -> DriftDocument:
    from ..catalog.proof import ProofRuns, prepare, prove

    began = time.monotonic()
    wheelhouse = _wheelhouse(args)
    resolution = resolve_latest(catalog.version_set(SNAPSHOT), wheelhouse)
    _progress(f"latest: {resolution.describe()}")
    drifting = drift_catalog(catalog, resolution)
    envs = Path(args.envs).resolve() if args.envs else cache("envs", "drift")
    set_envs = prepare(drifting, LATEST, envs, wheelhouse, _progress)
    env = probe(str(env_python(set_envs.clean)))
    check_set(drifting, LATEST, env)
    cases = drifting.select(args.cases)
    controls = [] if args.cases else [c.case for c in drifting.controls]
    if args.jobs < 1:
        raise MinreproError("--jobs must be at least 1")
    results = run_cases([*cases, *controls], env, LATEST, CaseRuns(args.timeout, _progress, args.jobs, args.warm))
    snapshot_run = Path(args.results) / f"{SNAPSHOT}-{env.machine}.json"
    recorded = (
        {row["case"]: row["headline"] for row in read_results_file(snapshot_run)["cases"]}
        if snapshot_run.is_file()
        else {}
    )
    drift = compare(catalog, results, recorded)
    patches, carried = check_patches(drifting, resolution.snapshot, env.versions, set_envs.patched)
    proof = None
    if not args.no_proofs:
        proof = prove(drifting, cases, set_envs, ProofRuns(args.timeout, _progress, args.jobs), choose=chooser(carried))
        by_id = {c.id: c for c in cases}
        for row in proof["cases"]:
            row["status"] = proof_status(row, set(carried), by_id[row["case"]])
    if not args.no_bisect:
        runs = {r.case: r for r in results}
        by_id = {c.id: c for c in catalog.cases}
        for row in drift:
            if row.kind in (NOW_PASSES, NEWLY_FAILS) and row.case in by_id:
                row.changed_by = name_release(by_id[row.case], row.kind, resolution, runs[row.case], args)
    environment = {k: v for k, v in results_document(env, LATEST, results).items() if k not in ("set", "cases")}
    return DriftDocument(
        resolution, environment, [asdict(r) for r in results], drift, patches, proof, time.monotonic() - began
    )


def _wheelhouse(args: argparse.Namespace) -> Path | None:
    """Where `drift` installs from: `--wheelhouse`, else MINREPRO_WHEELHOUSE, else the index."""
    return Path(args.wheelhouse) if args.wheelhouse else wheelhouse_from_env()


def name_release(case: Case, kind: str, resolution: Resolution, seen: CaseResult, args: argparse.Namespace) -> str:
    """The release between the snapshot's and latest's that gives the case latest's outcome: the library whose move
    alone does it, bisected over its releases with the others at the snapshot's (`reports.bisect`'s judge and
    search; one venv per release judged, cached). A sentence where it cannot say."""
    from ..reports.bisect import Judge, first_flip

    changed = resolution.changed()
    base = dict(resolution.snapshot)
    wheelhouse = _wheelhouse(args)
    envs = Path(args.envs).resolve() if args.envs else cache("envs")
    judge = Judge(
        case, base, frozenset(base), envs / "bisect", cache("bisect", f"{case.id}.json"), args.timeout, wheelhouse
    )
    judge.log = _progress
    start = "bad" if kind == NOW_PASSES else "good"  # the snapshot's side
    latest = {d: Version(new) for d, (_, new) in changed.items()}
    key = " ".join(judge.requirements(latest))
    judge.cache.setdefault(  # the run just made on latest is that requirement set's observation
        key, {"headline": seen.headline, "raw_headline": seen.headline, "signature": seen.signature}
    )
    try:
        if judge({}) != start:
            return f"not bisected: not {'failing' if start == 'bad' else 'passing'} on {SNAPSHOT}'s releases here"
        alone = [d for d in changed if judge({d: latest[d]}) not in (start, "skip")]
        if not alone:
            return f"{' + '.join(f'{d} {v}' for d, v in latest.items())} together"
        library = alone[0]
        old, new = (Version(v) for v in changed[library])
        span = [v for v in index_releases(library, wheelhouse) if old <= v <= new and newest_final([v]) == v]
        flipped = first_flip(span, lambda v: judge({library: v}), start)
        return f"{library} {flipped}"
    except MinreproError as exc:
        return f"not bisected: {exc}"


def _record(catalog: Catalog, doc: DriftDocument, results: Path, docs: Path, partial: bool = False) -> None:
    """`partial`: a run of some cases, laid over the machine's recorded run where it ran on the same releases."""
    from ..catalog.pages import write_docs

    where = results / "drift" / f"{LATEST}-{doc.environment['machine']}.json"
    if partial and where.is_file():
        doc = merged(DriftDocument.from_dict(read_results_file(where)), doc)
    write_results(where, doc.to_dict())
    _progress(f"recorded in {where}")
    if (docs / "catalog.md").is_file():
        changed = write_docs(catalog, results, docs)
        _progress(f"{len(changed)} page(s) written")


def register(sub: argparse._SubParsersAction) -> None:
    drift = sub.add_parser(
        "drift",
        help="the catalog on the newest releases the index serves now (latest), against what the manifest declares "
        "for the newest snapshot; exits 1 on any change",
    )
    drift.add_argument("cases", nargs="*", metavar="CASE", help="cases to run (default: every case and control)")
    drift.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    drift.add_argument("--jobs", type=int, default=1, help="cases run at a time (default 1)")
    drift.add_argument(
        "--warm", action="store_true", help="run the cases in a fork server (a case that differs is confirmed cold)"
    )
    drift.add_argument("--no-proofs", action="store_true", help="check that the patches apply, but run no proof")
    drift.add_argument("--no-bisect", action="store_true", help="do not bisect a case whose outcome changed")
    drift.add_argument(
        "--wheelhouse",
        help="resolve latest from this directory's wheels and install from it (default: the index; "
        "MINREPRO_WHEELHOUSE too)",
    )
    drift.add_argument("--envs", help="where the latest envs live (default: ~/.cache/minrepro/envs/drift)")
    drift.add_argument(
        "--record",
        action="store_true",
        help="write the run to RESULTS/drift/latest-MACHINE.json and regenerate the family pages (`minrepro docs`)",
    )
    drift.add_argument(
        "--results",
        default="results",
        help="the results directory: the newest snapshot's recorded runs are read from it, and --record writes "
        "there (default: results)",
    )
    drift.add_argument("--docs", default="docs", help="with --record: the docs directory (default: docs)")
    drift.add_argument(
        "--propose",
        action="store_true",
        help="print, as a unified diff to review, the manifest that would move the newest snapshot to what the run "
        "saw (sets.toml's pins and date, catalog.toml's outcomes); nothing is applied",
    )
    drift.add_argument(
        "--from",
        dest="from_",
        metavar="FILE",
        help="report (or propose from) a recorded drift run instead of running one",
    )
    drift.set_defaults(func=cmd_drift)
