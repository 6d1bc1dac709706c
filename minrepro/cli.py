"""The `minrepro` command line. Errors a user can fix are one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Sequence

from . import __version__
from .catalog import check_case, code_lines, load_catalog
from .envs import env_of, read_marker
from .errors import MinreproError
from .harness import check_set, format_table, probe, results_document, run_cases, write_results
from .matrix import readme_with_matrices, tables, write_matrices
from .runner import DEFAULT_TIMEOUT, run_script


def _progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.manifest)
    cases = catalog.select(args.cases)
    env = probe(args.python)
    if args.set:
        check_set(catalog, args.set, env)
    set_name = args.set or catalog.detect_set(env.versions)
    print(f"minrepro run: {env.python} (Python {env.python_version}), set: {set_name or 'none matched'}, "
          f"{'CUDA: ' + env.gpu if env.cuda else 'no CUDA'}", file=sys.stderr)
    results = run_cases(catalog, cases, env, set_name, args.timeout, _progress)
    document = results_document(env, set_name, results)
    if args.results:
        write_results(Path(args.results), document)
    differs = [r.case for r in results if r.verdict == "differs"]
    if args.json:
        print(json.dumps(document))
    else:
        print(format_table(results))
        print(f"\n{len(results)} cases: {len(differs)} differ from the manifest"
              + (f" ({', '.join(differs)})" if differs else ""))
    return 1 if differs else 0


def cmd_check(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.manifest)
    bad = 0
    for case in catalog.select(args.cases):
        problems = check_case(case, catalog)
        lines = code_lines(case.script.read_text(encoding="utf-8"))
        print(f"{case.id:34} {lines:3} code lines  " + ("ok" if not problems else "; ".join(problems)))
        bad += bool(problems)
    return 1 if bad else 0


def cmd_signature(args: argparse.Namespace) -> int:
    result = run_script(args.script, python=args.python, timeout=args.timeout)
    if result.signature is None:
        raise MinreproError(f"{args.script} does not fail: nothing to sign (exit 0 in {result.seconds:.1f} s)")
    if args.json:
        print(json.dumps({"headline": result.raw_headline, "signature": result.signature.to_dict(),
                          "owner": str(result.signature.owner), "seconds": round(result.seconds, 2)}))
    else:
        print(result.signature)
        print(f"  owner: {result.signature.owner}")
    return 0


def cmd_matches(args: argparse.Namespace) -> int:
    """Exit 0 iff the candidate fails with the expected signature: an interestingness test for other
    reducers (Shrink Ray, pysource-minimize, C-Vise) that is the same oracle `minrepro reduce` uses."""
    from .signature import Signature

    try:
        expected = Signature.from_dict(json.loads(Path(args.expect).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MinreproError(f"cannot read the expected signature from {args.expect}: {exc}") from None
    result = run_script(args.candidate, python=args.python, timeout=args.timeout)
    return 0 if result.signature == expected else 1


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


def cmd_reduce(args: argparse.Namespace) -> int:
    from .reduction import ReduceOptions, print_summary, reduce_script

    if args.jobs < 1:
        raise MinreproError("--jobs must be at least 1")
    if (args.script is None) == (args.scenario is None):
        raise MinreproError("give a SCRIPT to reduce or --scenario PRESET (not both)")
    if args.scenario is not None:
        return _reduce_scenario(args)
    options = ReduceOptions(
        script=Path(args.script), out=Path(args.out) if args.out else None, signature=args.signature,
        oracle=args.oracle, python=args.python, jobs=args.jobs, timeout=args.timeout, seed=args.seed,
        executor=args.executor, workdir=Path(args.workdir) if args.workdir else None, fresh=args.fresh,
    )
    summary = reduce_script(options, log=_progress if args.verbose else lambda _: None)
    print_summary(summary, args.json)
    return 0


def cmd_env_create(args: argparse.Namespace) -> int:
    from .envs import create_env

    catalog = load_catalog(args.manifest)
    python = create_env(Path(args.dir), [str(r) for r in catalog.version_set(args.set).requirements],
                        Path(args.wheelhouse) if args.wheelhouse else None, label=args.set)
    print(python)
    return 0


def _case_patch_ids(catalog, ids: list[str]) -> list[str]:
    if ids:
        return ids
    return sorted({pid for case in catalog.cases for pid in case.patches})


def cmd_patch_list(args: argparse.Namespace) -> int:
    from .patching import load_patches

    catalog = load_catalog(args.manifest)
    users = {}
    for case in catalog.cases:
        for pid in case.patches:
            users.setdefault(pid, []).append(case.id)
    for patch in load_patches():
        print(f"{patch.library}/{patch.name:38} made against {patch.made_against:22} applies to "
              f"{', '.join(patch.applies_to):45} cases: {', '.join(users.get(patch.id, [])) or '-'}")
    return 0


def cmd_patch_apply(args: argparse.Namespace) -> int:
    from .envs import env_python, require_tool_env
    from .patching import apply_patches, select

    catalog = load_catalog(args.manifest)
    require_tool_env(Path(args.into))
    env = probe(str(env_python(Path(args.into))))
    check_set(catalog, args.set, env)
    chosen = select(_case_patch_ids(catalog, args.patches), env.versions)
    for report in apply_patches(chosen, Path(args.into)):
        where = f"at line {report.line}" + (f" (offset {report.offset:+d})" if report.offset else "") if report.line else ""
        print(f"{report.patch:45} {report.file:40} hunk {report.hunk}: {report.status} {where}".rstrip())
    print(f"{len(chosen)} patch(es) applied to {args.into}", file=sys.stderr)
    return 0


def cmd_patch_revert(args: argparse.Namespace) -> int:
    from .patching import revert_patches

    for name in revert_patches(Path(args.env)):
        print(f"reverted {name}")
    return 0


def cmd_patch_prove(args: argparse.Namespace) -> int:
    from .proof import format_proof, prepare, prove

    catalog = load_catalog(args.manifest)
    clean, patched = prepare(catalog, args.set, Path(args.envs), Path(args.wheelhouse) if args.wheelhouse else None,
                             _progress)
    document = prove(catalog, catalog.select(args.cases), args.set, clean, patched, args.timeout, _progress)
    if args.results:
        write_results(Path(args.results.format(machine=document["machine"])), document)
    print(format_proof(document))
    bad = [c["case"] for c in document["cases"] if c["verdict"] == "differs"]
    print(f"\n{len(document['cases'])} patched cases on {args.set}: {len(bad)} differ" + (f" ({', '.join(bad)})" if bad else ""))
    return 1 if bad else 0


def cmd_upstream_tests(args: argparse.Namespace) -> int:
    from .envs import env_python, pip_install
    from .patching import apply_patches, select
    from .proof import prepare
    from .upstream import (SELECTIONS, STAND_INS, TAGS, TEST_REQUIREMENTS, new_failures, run_tests, tests_checkout,
                           write_stand_ins)

    catalog = load_catalog(args.manifest)
    version = catalog.version_set(args.set).pins().get(args.library)
    if args.library not in SELECTIONS or version is None:
        raise MinreproError(f"no upstream tests known for {args.library!r} (known: {', '.join(SELECTIONS)})")
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else None
    clean, patched = prepare(catalog, args.set, Path(args.envs), wheelhouse, _progress)
    ids = [pid for pid in _case_patch_ids(catalog, []) if pid.startswith(args.library + "/")]
    chosen = select(ids, catalog.sets[args.set].pins())
    apply_patches(chosen, patched)
    for env in (clean, patched):
        pip_install(env, TEST_REQUIREMENTS[args.library], wheelhouse)
    ref = args.ref or TAGS[args.library].format(version)
    cache = Path(args.envs).parent / "upstream"
    checkout = tests_checkout(args.library, ref, Path(args.source) if args.source else None, cache)
    selection = shlex.split(args.select) if args.select else SELECTIONS[args.library]
    stand_ins = STAND_INS.get(args.library, []) if args.offline else []
    runs = {}
    for label, env in (("baseline", clean), ("patched", patched)):
        if stand_ins:  # rebuilt before each run: tests may write into them (family I did)
            write_stand_ins(args.library, clean, checkout)
        _progress(f"{args.library} tests at {ref}, {label}: {' '.join(selection)}")
        runs[label] = run_tests(env, checkout, selection, cache / f"{args.library}-{ref}-{label}.xml", args.timeout,
                                args.offline)
    fresh = new_failures(runs["baseline"], runs["patched"])
    print(f"{args.library} {version} ({args.set}), tests from {ref}; patches: {', '.join(p.path.name for p in chosen)}")
    print("| run | passed | failed | skipped | s |\n|---|---|---|---|---|")
    for label, run in runs.items():
        print(f"| {label} | {run.count('passed')} | {run.count('failed')} | {run.count('skipped')} | {run.seconds:.0f} |")
    print(f"new failures with the patches: {len(fresh)}" + "".join(f"\n  {t}" for t in fresh))
    if args.results:
        write_results(Path(args.results), {
            "library": args.library, "version": version, "set": args.set, "ref": ref, "selection": selection,
            "patches": [p.path.name for p in chosen], "new_failures": fresh, "offline_stand_ins": stand_ins,
            "machine": probe(str(env_python(clean))).machine,
            "runs": {k: {"passed": v.count("passed"), "failed": v.count("failed"), "skipped": v.count("skipped"),
                         "seconds": round(v.seconds), "failed_tests": sorted(t for t, o in v.outcomes.items() if o == "failed")}
                     for k, v in runs.items()}})
    return 1 if fresh else 0


def cmd_bisect(args: argparse.Namespace) -> int:
    from packaging.version import Version

    from .bisection import bisect_package, judge_for, minimal_upgrades, releases

    catalog = load_catalog(args.manifest)
    [case] = catalog.select([args.case])
    packages = [p.strip().lower() for p in (args.packages or args.package).split(",") if p.strip()]
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else None
    judge = judge_for(case, packages, Path(args.envs), args.timeout, wheelhouse, _progress)
    base = judge.base
    results = []
    for package in packages:
        versions = releases(package, args.pre, wheelhouse)
        bad = Version(args.bad) if args.bad else Version(base[package])
        good = Version(args.good) if args.good else None
        results.append(bisect_package(judge, package, versions, bad, good))
    document = {"case": case.id, "base": base, "packages": [r.__dict__ for r in results]}
    for r in results:
        if r.first_fixed:
            print(f"{case.id}: {r.package} first fixed in {r.first_fixed} (last bad {r.last_bad}; fails at {r.bad})")
        else:
            print(f"{case.id}: {r.package} still fails at {r.good} (fails at {r.bad})")
    if len(packages) > 1:
        targets = {r.package: Version(r.first_fixed or r.good) for r in results}
        minimal = minimal_upgrades(judge, packages, targets)
        document["minimal_upgrades"] = [[f"{p}>={targets[p]}" for p in subset] for subset in minimal]
        print("minimal upgrades that make it pass: "
              + ("; ".join(" + ".join(f"{p}>={targets[p]}" for p in subset) for subset in minimal) or "none"))
    write_results(Path(args.results) / "bisect" / f"{case.id}.json", document)
    if args.record:
        from .catalog import record_fixed_in

        fixed = [f"{r.package}=={r.first_fixed}" for r in results if r.first_fixed]
        record_fixed_in(catalog.path, case.id, fixed)
        print(f"recorded fixed_in = {fixed} for {case.id} in {catalog.path}", file=sys.stderr)
        if Path(args.readme).is_file():
            write_matrices(load_catalog(args.manifest), Path(args.results), Path(args.readme))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import draft, render_markdown

    catalog = load_catalog(args.manifest)
    if args.all == bool(args.cases):
        raise MinreproError("name one or more cases, or --all")
    cases = catalog.cases if args.all else catalog.select(args.cases)
    out_dir = Path(args.out) if args.out else None
    for case in cases:
        python = Path(args.python) if args.python else None
        report = draft(case, catalog, Path(args.results), python)
        text = json.dumps(report, indent=2) if args.format == "json" else render_markdown(report)
        if out_dir is None:
            print(text)
        else:
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / f"{case.id}.{'json' if args.format == 'json' else 'md'}"
            target.write_text(text + "\n", encoding="utf-8")
            print(f"{target}: {report['repository']}: {report['title']}")
    return 0


def _reduce_scenario(args: argparse.Namespace) -> int:
    from .reduction import ReduceOptions, print_summary
    from .scenario_reduction import reduce_scenario

    options = ReduceOptions(script=Path("-"), out=Path(args.out) if args.out else None, python=args.python,
                            jobs=args.jobs, timeout=args.timeout, seed=args.seed, executor=args.executor,
                            workdir=Path(args.workdir) if args.workdir else None, fresh=args.fresh)
    trip, summary = reduce_scenario(args.scenario, args.scale, args.device, options, args.keep_steps,
                                    _progress if args.verbose else lambda _: None)
    print(f"scenario {args.scenario} ({args.scale}, {args.device}): {len(trip.steps) - 1} spec steps "
          f"({', '.join(name for name, _, _ in trip.steps[1:]) or 'none accepted'}), {trip.runs} scenario runs")
    print_summary(summary, args.json)
    return 0


def cmd_scenario(args: argparse.Namespace) -> int:
    from reducers.scenario import presets, render, scaled

    if args.action == "matrix":
        return _scenario_matrix(args)
    if args.readme or args.check:
        raise MinreproError("--readme and --check are for `minrepro scenario matrix`")
    available = presets(args.device)
    if args.action == "list":
        for name, spec in available.items():
            print(f"{name:22} {spec.peft.call:16} {spec.action:17} device_map={spec.placement.device_map}")
        return 0
    names = args.presets or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise MinreproError(f"unknown scenario preset(s): {', '.join(unknown)} (known: {', '.join(available)})")
    if args.action == "render":
        for name in names:
            print(render(scaled(available[name], args.scale)))
        return 0
    # table: run each preset here; the signature each hits
    from .scenario_reduction import scenario_table

    env = probe(args.python)
    set_name = load_catalog(args.manifest).detect_set(env.versions)
    # a minrepro env records the patches applied to it
    patches = (read_marker(env_of(args.python)) or {}).get("patches", []) if args.python else []
    measured = _measured_rows(Path(args.results), env, patches) if args.results and not args.fresh else []
    if measured:
        _progress(f"resuming {args.results}: {len(measured)} preset(s) measured there already (--fresh runs them again)")

    def record(rows: list[dict]) -> None:
        _progress(f"{rows[-1]['preset']}: {rows[-1]['outcome']} {rows[-1]['headline'][:80]} ({rows[-1]['seconds']:.0f} s)")
        if args.results:  # rows of presets not asked for this time stay in the file
            kept = [r for r in measured if r["preset"] not in names]
            order = {name: i for i, name in enumerate(available)}
            write_results(Path(args.results), {"set": None, "scenario_set": set_name, "machine": env.machine,
                                               "gpu": env.gpu, "versions": env.versions, "patches": patches,
                                               "rows": sorted(kept + rows, key=lambda r: order.get(r["preset"], len(order)))})

    rows = scenario_table(names, args.scale, args.device, env.python, args.timeout, record, measured)
    print("| preset | set | scale | outcome | signature | owner | s |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['preset']} | {set_name} | {r['scale']} | {r['outcome']} | {r['headline'][:90]} | {r['owner']} | {r['seconds']} |")
    return 0


def _scenario_matrix(args: argparse.Namespace) -> int:
    """Print the seed-scenario tables from recorded results, or write them into the README's block."""
    from . import scenario_matrix

    if args.presets:
        raise MinreproError("scenario matrix takes no presets: it renders every table recorded under --from")
    if args.check and not args.readme:
        raise MinreproError("--check needs --readme (the README whose block it compares)")
    source = Path(args.source)
    if not source.is_dir():
        raise MinreproError(f"{source} is not a directory of scenario results")
    catalog = load_catalog(args.manifest)
    if args.readme and args.check:
        readme = Path(args.readme)
        if scenario_matrix.readme_with_tables(source, catalog, readme) != readme.read_text(encoding="utf-8"):
            raise MinreproError(f"{readme}'s scenario tables are stale: run `minrepro scenario matrix --readme {readme}`")
    elif args.readme:
        scenario_matrix.write_readme(source, catalog, Path(args.readme))
        print(f"scenario tables written to {args.readme}", file=sys.stderr)
    else:
        print(scenario_matrix.render(source, catalog))
    return 0


def _measured_rows(path: Path, env, patches: list[str]) -> list[dict]:
    """Rows of an earlier table in the same environment (versions, machine, patches), for a run cut short."""
    if not path.is_file():
        return []
    doc = json.loads(path.read_text())
    same = (doc.get("versions"), doc.get("machine"), doc.get("gpu"), doc.get("patches", [])) == (
        env.versions, env.machine, env.gpu, patches)
    return doc.get("rows", []) if same else []


def cmd_list(args: argparse.Namespace) -> int:
    for case in load_catalog(args.manifest).cases:
        print(f"{case.id:34} {case.family:3} {case.device:5} pinned={case.pinned:12} newest={case.newest}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minrepro", description=__doc__)
    parser.add_argument("--version", action="version", version=f"minrepro {__version__}")
    parser.add_argument("--manifest", help="catalog manifest (default: the bundled minrepro/cases/catalog.toml)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run catalog cases here and compare with the manifest")
    run.add_argument("cases", nargs="*", metavar="CASE", help="case ids (default: all)")
    run.add_argument("--python", help="interpreter whose environment runs the cases (default: this one)")
    run.add_argument("--set", help="version set whose declared outcomes apply; the installed pins must match")
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    run.add_argument("--results", help="also write the results as JSON to this file")
    run.add_argument("--json", action="store_true", help="print the results as one JSON object")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="static checks: line limit, imports, PEP 723 pins")
    check.add_argument("cases", nargs="*", metavar="CASE")
    check.set_defaults(func=cmd_check)

    signature = sub.add_parser("signature", help="run a script and print its failure signature")
    signature.add_argument("script")
    signature.add_argument("--python")
    signature.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    signature.add_argument("--json", action="store_true")
    signature.set_defaults(func=cmd_signature)

    matches = sub.add_parser("matches", help="exit 0 iff a script fails with a recorded signature (an oracle)")
    matches.add_argument("--expect", required=True, help="JSON of the signature (as `signature --json` prints)")
    matches.add_argument("candidate")
    matches.add_argument("--python")
    matches.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    matches.set_defaults(func=cmd_matches)

    matrix = sub.add_parser("matrix", help="render the cases x version sets matrix from recorded results")
    matrix.add_argument("--results", default="results", help="directory of <set>-<machine>.json files")
    matrix.add_argument("--readme", help="rewrite the matrix block of this README (default: print)")
    matrix.add_argument("--check", action="store_true", help="fail if the README's matrix is stale")
    matrix.set_defaults(func=cmd_matrix)

    reduce = sub.add_parser("reduce", help="shrink a failing script, keeping its failure signature")
    reduce.add_argument("script", nargs="?")
    reduce.add_argument("--scenario", metavar="PRESET", help="start from a seed scenario (see `minrepro scenario list`)")
    reduce.add_argument("--scale", default="tiny", choices=["tiny", "e2b", "e4b"], help="scenario model scale")
    reduce.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="scenario placement family")
    reduce.add_argument("--keep-steps", action="store_true", help="keep every accepted scenario step beside the output")
    reduce.add_argument("-o", "--out", help="output path (default: <stem>.min.py beside SCRIPT)")
    reduce.add_argument("--signature", metavar="REGEX",
                        help="keep candidates whose final exception line matches REGEX (type and library "
                             "frames still required)")
    reduce.add_argument("--oracle", metavar="CMD", help="interestingness command; gets the candidate path, "
                                                        "exit 0 means interesting")
    reduce.add_argument("--python", help="interpreter to run candidates with (default: this one)")
    reduce.add_argument("--jobs", type=int, default=1, help="candidates run in parallel")
    reduce.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per candidate")
    reduce.add_argument("--seed", type=int, default=0, help="order in which proposals are tried")
    reduce.add_argument("--executor", default="forkserver", choices=["forkserver", "warm-pool", "cold"],
                        help="how candidates run (each in its own process either way)")
    reduce.add_argument("--workdir", help="cache and state directory (default: .minrepro/<stem>-<hash>)")
    reduce.add_argument("--fresh", action="store_true", help="ignore a previous run's cache and state")
    reduce.add_argument("--json", action="store_true", help="end with a JSON summary line")
    reduce.add_argument("-v", "--verbose", action="store_true", help="log passes and accepted steps")
    reduce.set_defaults(func=cmd_reduce)

    env = sub.add_parser("env", help="isolated environments that minrepro creates (the only ones it patches)")
    env_sub = env.add_subparsers(dest="env_command", required=True)
    create = env_sub.add_parser("create", help="create a venv with a version set installed")
    create.add_argument("dir")
    create.add_argument("--set", required=True)
    create.add_argument("--wheelhouse", help="install offline from this directory")
    create.set_defaults(func=cmd_env_create)

    patch = sub.add_parser("patch", help="the fix prototypes in patches/")
    patch_sub = patch.add_subparsers(dest="patch_command", required=True)
    plist = patch_sub.add_parser("list", help="every diff, the release it was made against, its cases")
    plist.set_defaults(func=cmd_patch_list)
    apply = patch_sub.add_parser("apply", help="apply patches to a minrepro-created env, reporting per hunk")
    apply.add_argument("patches", nargs="*", metavar="LIB/NAME", help="patch ids (default: every case's patches)")
    apply.add_argument("--set", required=True, help="the version set installed in the env")
    apply.add_argument("--into", required=True, metavar="ENV", help="a venv made by `minrepro env create`")
    apply.set_defaults(func=cmd_patch_apply)
    revert = patch_sub.add_parser("revert", help="undo every patch applied to a minrepro-created env")
    revert.add_argument("env")
    revert.set_defaults(func=cmd_patch_revert)
    prove = patch_sub.add_parser("prove", help="patched cases pass while their unpatched twins fail, in one run")
    prove.add_argument("cases", nargs="*", metavar="CASE")
    prove.add_argument("--set", required=True)
    prove.add_argument("--envs", default=".minrepro/envs", help="where the clean and patched envs live")
    prove.add_argument("--wheelhouse", help="install offline from this directory")
    prove.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    prove.add_argument("--results", help="write the proof as JSON here ({machine} is replaced)")
    prove.set_defaults(func=cmd_patch_prove)

    upstream = sub.add_parser("upstream-tests", help="a library's own tests without and with its patches")
    upstream.add_argument("library", choices=["accelerate", "peft", "bitsandbytes"])
    upstream.add_argument("--set", required=True)
    upstream.add_argument("--source", help="a checkout or git directory of the library (default: clone the tag)")
    upstream.add_argument("--ref", help="tag or commit of the tests (default: the set's release tag)")
    upstream.add_argument("--select", metavar="ARGS", help='pytest arguments selecting tests, one string '
                          '(default: the known ones), e.g. --select "tests/test_functional.py -k 4bit"')
    upstream.add_argument("--envs", default=".minrepro/envs")
    upstream.add_argument("--wheelhouse")
    upstream.add_argument("--timeout", type=float, default=3600)
    upstream.add_argument("--offline", action="store_true", help="no hub: set HF_HUB_OFFLINE and build local "
                          "stand-ins (published config, random weights) for the hub models the tests load")
    upstream.add_argument("--results", help="write the comparison as JSON here")
    upstream.set_defaults(func=cmd_upstream_tests)

    bisect = sub.add_parser("bisect", help="find the release of a package that fixed (or broke) a case")
    bisect.add_argument("case")
    target = bisect.add_mutually_exclusive_group(required=True)
    target.add_argument("--package", help="the package whose releases are searched")
    target.add_argument("--packages", metavar="A,B", help="joint mode: each alone, then minimal upgrade sets")
    bisect.add_argument("--bad", help="a release on which the case fails (default: its pin)")
    bisect.add_argument("--good", help="a release on which it passes (default: the newest release)")
    bisect.add_argument("--pre", action="store_true", help="include prereleases")
    bisect.add_argument("--envs", default=".minrepro/envs", help="where the per-release venvs live")
    bisect.add_argument("--wheelhouse")
    bisect.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    bisect.add_argument("--results", default="results", help="writes <results>/bisect/<case>.json")
    bisect.add_argument("--record", action="store_true", help="write fixed_in into the manifest")
    bisect.add_argument("--readme", default="README.md", help="README whose matrix --record regenerates")
    bisect.set_defaults(func=cmd_bisect)

    report = sub.add_parser("report", help="draft an issue for the right repository (never posts anything)")
    report.add_argument("cases", nargs="*", metavar="CASE")
    report.add_argument("--all", action="store_true", help="every catalog case")
    report.add_argument("--format", choices=["md", "json"], default="md")
    report.add_argument("--out", help="write one file per case into this directory (default: print)")
    report.add_argument("--results", default="results", help="recorded runs, bisections and proofs")
    report.add_argument("--python", help="interpreter of the env the case ran in, for `transformers env` etc.")
    report.set_defaults(func=cmd_report)

    scenario = sub.add_parser("scenario", help="the seeds' Gemma 4 scenarios as specs: list, render, run")
    scenario.add_argument("action", choices=["list", "render", "table", "matrix"])
    scenario.add_argument("presets", nargs="*", metavar="PRESET")
    scenario.add_argument("--scale", default="tiny", choices=["tiny", "e2b", "e4b"])
    scenario.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    scenario.add_argument("--python")
    scenario.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    scenario.add_argument("--results", help="table: also write the rows as JSON here; presets it holds from the "
                          "same environment are not run again")
    scenario.add_argument("--fresh", action="store_true", help="table: run every preset, ignoring rows in --results")
    scenario.add_argument("--from", dest="source", default="results/scenarios",
                          help="matrix: the recorded tables and reductions")
    scenario.add_argument("--readme", help="matrix: write the tables into this README's scenarios block")
    scenario.add_argument("--check", action="store_true", help="matrix: fail if the README's block is not up to date")
    scenario.set_defaults(func=cmd_scenario)

    listing = sub.add_parser("list", help="list catalog cases")
    listing.set_defaults(func=cmd_list)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MinreproError as exc:
        print(f"minrepro: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("minrepro: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a full disk or a vanished directory: say so in a line; state written so far is kept
        print(f"minrepro: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
