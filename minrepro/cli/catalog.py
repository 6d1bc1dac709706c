"""Catalog commands: `run` the cases and judge them, `check` their scripts, `list` them, render the `matrix`, and
`docs`: every page generated from the catalog and results/ (the family pages, docs/catalog.md, docs/main.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..catalog.manifest import check_case, load_catalog
from ..catalog.matrix import readme_with_matrices, tables, write_matrices
from ..catalog.pages import stale_pages, write_docs
from ..catalog.run import CaseRuns, check_set, format_table, results_document, run_cases, write_results
from ..catalog.targets import is_script, reference_run, resolve, results_home, static_problems, with_pins
from ..envs.refs import parse_repo, ref_env, refs_page
from ..envs.venvs import env_of, read_marker, set_env, wheelhouse_from_env
from ..errors import MinreproError
from ..harness.probe import probe
from ..harness.runner import DEFAULT_TIMEOUT
from ..reducers.source import code_lines
from .common import progress as _progress


def cmd_run(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.manifest)
    cases = [case for case, _ in resolve(catalog, args.cases, args.python, args.timeout, _progress)] or catalog.cases
    refs = []
    if args.repo:
        if not args.set or args.python:
            raise MinreproError("--repo lays refs over a version set's env: give --set, not --python")
        args.python, refs = str(ref_env(catalog, args.set, [parse_repo(spec) for spec in args.repo])), None
    env = probe(args.python)
    if args.repo:
        refs = read_marker(env_of(args.python))["refs"]
    resolution = None
    if args.set:
        from .drift import with_latest

        catalog, resolution = with_latest(catalog, [args.set], wheelhouse_from_env())
        check_set(catalog, args.set, env)
    set_name = args.set or catalog.detect_set(env.versions)
    print(
        f"minrepro run: {env.python} (Python {env.python_version}), set: {set_name or 'none matched'}, "
        f"{'CUDA: ' + env.gpu if env.cuda else 'no CUDA'}",
        file=sys.stderr,
    )
    if args.jobs < 1:
        raise MinreproError("--jobs must be at least 1")
    start = time.monotonic()
    timings: dict = {}
    results = run_cases(cases, env, set_name, CaseRuns(args.timeout, _progress, args.jobs, args.warm), timings)
    wall = time.monotonic() - start
    document = results_document(env, set_name, results)
    # the catalog phase's time is a target (`docs/benchmarks.md`, "The catalog phase"): recorded with what it ran under
    document.update(wall_seconds=round(wall, 1), jobs=args.jobs, warm=args.warm, timings=timings)
    if resolution is not None:
        document["latest"] = resolution.to_dict()
    if refs:
        document["refs"] = refs
        print(
            "refs: " + "; ".join(f'{r["library"]} {r["commit"][:12]} "{r["subject"][:60]}"' for r in refs),
            file=sys.stderr,
        )
    if args.results:
        write_results(Path(args.results), document)
    if args.doc:
        Path(args.doc).write_text(refs_page(document), encoding="utf-8")
    differs = [r.case for r in results if r.verdict == "differs"]
    if args.json:
        print(json.dumps(document))
    else:
        print(format_table(results))
        print(
            f"\n{len(results)} cases: {len(differs)} differ from the manifest"
            + (f" ({', '.join(differs)})" if differs else "")
            + f"; {wall:.0f} s wall for the {set_name or 'installed'} set ({args.jobs} at a time"
            + (", warm)" if args.warm else ", cold)")
            + f": {_breakdown(timings)}"
        )
    return 1 if differs else 0


def _breakdown(timings: dict) -> str:
    parts = [
        ("server start", timings.get("warmup_seconds")),
        ("runs", timings.get("runs_seconds")),
        ("cold confirmations", timings.get("confirm_seconds")),
    ]
    return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in parts if seconds is not None)


def cmd_check(args: argparse.Namespace) -> int:
    """Static checks (line limit, imports, PEP 723 pins) of cases or scripts; with --set, also run each of them in
    every named set's environment (made once in the cache) and record the runs, which `report` then reads."""
    from .drift import with_latest

    catalog = load_catalog(args.manifest)
    sets = [s.strip() for s in args.set.split(",") if s.strip()] if args.set else []
    catalog, args.latest = with_latest(catalog, sets, wheelhouse_from_env())
    for name in sets:
        catalog.version_set(name)
    if args.patched and not sets:
        raise MinreproError("--patched runs in the sets' envs: name them with --set")
    from ..inputs import prepare_names

    args.cases, _ = prepare_names(args.cases, args.script_args, args.module, args.python)
    if args.write_pins and (len(args.cases) != 1 or not is_script(args.cases[0])):
        raise MinreproError("--write-pins takes exactly one script")
    targets = (
        resolve(catalog, args.cases, args.python, args.timeout, _progress)
        if args.cases
        else [(case, None) for case in catalog.cases]
    )
    bad = 0
    for case, _ in targets:
        problems = check_case(case, catalog) if not case.user_script else static_problems(case.script)
        lines = code_lines(case.script.read_text(encoding="utf-8"))
        print(f"{case.id:34} {lines:3} code lines  " + ("ok" if not problems else "; ".join(problems)))
        bad += bool(problems)
    if args.write_pins:
        [(case, reference)] = targets
        out = Path(args.write_pins)
        if out.resolve() == case.script:
            raise MinreproError("--write-pins writes a copy; it never overwrites the script")
        loaded = reference_run(case.script, reference, args.timeout).loaded  # the run resolve() made
        out.write_text(with_pins(case, probe(reference).versions, loaded), encoding="utf-8")
        print(f"pinned copy written to {out} (versions of {reference})")
    if sets:
        bad += _check_in_sets(catalog, [case for case, _ in targets], sets, args)
    return 1 if bad else 0


def _check_in_sets(catalog, cases: list, sets: list[str], args: argparse.Namespace) -> int:
    """Run the targets in each set's environment (with --patched, also in its twin with every catalog patch that
    applies: does a known fix fix this script?); a table target x set; the runs recorded per set."""
    scripts = [c for c in cases if c.user_script]
    where = Path(args.results) if args.results else (results_home(scripts[0].script) if len(scripts) == 1 else None)
    columns: dict[str, dict] = {}
    for name in sets:
        for patched in (False, True) if args.patched else (False,):
            env = probe(str(set_env(catalog, name, patched=patched, note=_progress)))
            # the patched run has no declared outcome to differ from: the set's declaration is for the release
            results = run_cases(
                cases, env, None if patched else name, CaseRuns(args.timeout, _progress, jobs=max(1, args.jobs))
            )
            columns[f"{name} + patches" if patched else name] = {r.case: r for r in results}
            if where is not None:  # patched runs apart: `report` and the matrix read <set>-<machine>.json only
                doc = results_document(env, name, results)
                if args.latest is not None and name == args.latest.version_set().name:
                    doc["latest"] = args.latest.to_dict()  # the releases it resolved to, where and when
                if patched:
                    doc["patches"] = (read_marker(env_of(env.python)) or {}).get("patches", [])
                write_results(where / ("patched" if patched else "") / f"{name}-{env.machine}.json", doc)
    print("\n| target | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
    differs = 0
    for case in cases:
        cells = []
        for runs in columns.values():
            r = runs[case.id]
            shown = "pass" if r.observed == "pass" else f"{r.observed}: {r.headline[:60]}"
            cells.append(shown + (" ✗ differs" if r.verdict == "differs" else ""))
            differs += r.verdict == "differs"
        print(f"| {case.id} | " + " | ".join(cells) + " |")
    if where is not None:
        print(f"\nruns recorded in {where} (`minrepro report TARGET --results {where}` drafts from them)")
    return differs


def cmd_list(args: argparse.Namespace) -> int:
    for case in load_catalog(args.manifest).cases:
        outcomes = " ".join(f"{k}={v:12}" for k, v in case.outcomes.items())
        print(f"{case.id:34} {case.family:3} {case.device:5} {outcomes}")
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.manifest)
    if args.readme is None:
        print("\n\n".join(tables(catalog, Path(args.results))))
        return 0
    readme = Path(args.readme)
    if args.check:
        if readme_with_matrices(catalog, Path(args.results), readme) != readme.read_text(encoding="utf-8"):
            raise MinreproError(f"{readme}'s matrix is stale: run `minrepro matrix --readme {readme}`")
        return 0
    write_matrices(catalog, Path(args.results), readme)
    print(f"matrix written to {readme}", file=sys.stderr)
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.manifest)
    if args.check:
        stale = stale_pages(catalog, Path(args.results), Path(args.docs))
        if stale:
            raise MinreproError(
                f"{len(stale)} generated page(s) differ from what the catalog and {args.results} give "
                f"({', '.join(str(p) for p in stale[:5])}{', ...' if len(stale) > 5 else ''}): "
                "run `minrepro docs`"
            )
        return 0
    changed = write_docs(catalog, Path(args.results), Path(args.docs))
    print(
        f"{len(changed)} page(s) written" + (f": {', '.join(str(p) for p in changed)}" if changed else ""),
        file=sys.stderr,
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run catalog cases here and compare with the manifest")
    run.add_argument("cases", nargs="*", metavar="CASE|SCRIPT", help="case ids or script paths (default: every case)")
    run.add_argument("--python", help="interpreter whose environment runs the cases (default: this one)")
    run.add_argument(
        "--set",
        help="version set whose declared outcomes apply; the installed pins must match (`latest`: the index's newest "
        "releases, resolved now)",
    )
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    run.add_argument("--results", help="also write the results as JSON to this file")
    run.add_argument("--json", action="store_true", help="print the results as one JSON object")
    run.add_argument("--jobs", type=int, default=1, help="cases run at a time (default 1)")
    run.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="LIB=GITDIR[@REF]",
        help="with --set: that library at a ref of a fetched repository (default its HEAD, main), laid "
        "over the set's release; repeat for several libraries",
    )
    run.add_argument("--doc", metavar="FILE.md", help="with --repo: write the page of what still fails there")
    run.add_argument(
        "--warm",
        action="store_true",
        help="run cases in a fork server that imports the libraries "
        "once; a case that surprises there is confirmed cold",
    )
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="static checks of cases or scripts; with --set, run them on version sets")
    check.add_argument(
        "cases", nargs="*", metavar="CASE|SCRIPT", help="catalog case ids or script paths (default: every case)"
    )
    check.add_argument("-m", "--module", help="check this module's run as `python -m MODULE` (arguments after --)")
    check.add_argument(
        "--set",
        metavar="S1,S2",
        help="also run each target in these version sets' environments (made once in the cache) and record the runs; "
        "`latest` is the newest releases the index serves now",
    )
    check.add_argument(
        "--patched",
        action="store_true",
        help="with --set: also run each target with every catalog "
        "patch that applies to the set (in a twin env the tool made; never yours)",
    )
    check.add_argument("--python", help="reference interpreter for a script whose PEP 723 pins name no set")
    check.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per run")
    check.add_argument("--jobs", type=int, default=1, help="targets run at a time")
    check.add_argument(
        "--results",
        metavar="DIR",
        help="where the runs are recorded (default for one script: the cache, where `report SCRIPT` looks)",
    )
    check.add_argument(
        "--write-pins",
        metavar="OUT",
        help="write a copy of the one SCRIPT with a PEP 723 block pinning its reference environment's versions",
    )
    check.set_defaults(func=cmd_check)

    listing = sub.add_parser("list", help="list catalog cases")
    listing.set_defaults(func=cmd_list)

    matrix = sub.add_parser("matrix", help="render the cases x version sets matrix from recorded results")
    matrix.add_argument("--results", default="results", help="directory of <set>-<machine>.json files")
    matrix.add_argument("--readme", help="rewrite the matrix block of this README (default: print)")
    matrix.add_argument("--check", action="store_true", help="fail if the README's matrix is stale")
    matrix.set_defaults(func=cmd_matrix)

    docs = sub.add_parser(
        "docs",
        help="write the pages generated from the catalog and results/: a page per family "
        "(docs/families/), docs/catalog.md's blocks, docs/main.md",
    )
    docs.add_argument("--results", default="results", help="the recorded results (default: results)")
    docs.add_argument("--docs", default="docs", help="the docs directory (default: docs)")
    docs.add_argument("--check", action="store_true", help="write nothing; fail if a generated page is stale")
    docs.set_defaults(func=cmd_docs)
