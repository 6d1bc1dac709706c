"""Environment commands: `env create`, `patch list|apply|revert|prove`, `upstream-tests`."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ..catalog.manifest import load_catalog, stacking_order
from ..catalog.run import check_set, write_results
from ..errors import MinreproError
from ..harness.probe import probe
from ..harness.runner import DEFAULT_TIMEOUT
from .common import progress as _progress


def cmd_env_create(args: argparse.Namespace) -> int:
    from minrepro.envs.venvs import create_env

    catalog = load_catalog(args.manifest)
    python = create_env(
        Path(args.dir),
        [str(r) for r in catalog.version_set(args.set).requirements],
        Path(args.wheelhouse) if args.wheelhouse else None,
        label=args.set,
    )
    print(python)
    return 0


def _envs(args: argparse.Namespace) -> Path:
    """--envs, else the cache (never the current directory)."""
    from ..dirs import cache

    return Path(args.envs).resolve() if args.envs else cache("envs", "prove")


def _case_patch_ids(catalog, ids: list[str]) -> list[str]:
    """The patches named, else every case's, in stacking order: cases in manifest order, each case's patches in
    the order it lists them (a patch written on top of another must come after it; sorting broke that)."""
    if ids:
        return ids
    return stacking_order(catalog)


def cmd_patch_list(args: argparse.Namespace) -> int:
    from minrepro.envs.patching import load_patches

    catalog = load_catalog(args.manifest)
    users = {}
    for case in catalog.cases:
        for pid in case.patches:
            users.setdefault(pid, []).append(case.id)
    for patch in load_patches():
        print(
            f"{patch.library}/{patch.name:38} made against {patch.made_against:22} applies to "
            f"{', '.join(patch.applies_to):45} cases: {', '.join(users.get(patch.id, [])) or '-'}"
        )
    return 0


def cmd_patch_apply(args: argparse.Namespace) -> int:
    from minrepro.envs.venvs import env_python, require_tool_env
    from minrepro.envs.patching import apply_patches, select

    catalog = load_catalog(args.manifest)
    require_tool_env(Path(args.into))
    env = probe(str(env_python(Path(args.into))))
    check_set(catalog, args.set, env)
    chosen = select(_case_patch_ids(catalog, args.patches), env.versions)
    for report in apply_patches(chosen, Path(args.into)):
        where = (
            f"at line {report.line}" + (f" (offset {report.offset:+d})" if report.offset else "") if report.line else ""
        )
        print(f"{report.patch:45} {report.file:40} hunk {report.hunk}: {report.status} {where}".rstrip())
    print(f"{len(chosen)} patch(es) applied to {args.into}", file=sys.stderr)
    return 0


def cmd_patch_revert(args: argparse.Namespace) -> int:
    from minrepro.envs.patching import revert_patches

    for name in revert_patches(Path(args.env)):
        print(f"reverted {name}")
    return 0


def cmd_patch_prove(args: argparse.Namespace) -> int:
    from minrepro.catalog.proof import ProofRuns, format_proof, prepare, prove

    catalog = load_catalog(args.manifest)
    envs = prepare(catalog, args.set, _envs(args), Path(args.wheelhouse) if args.wheelhouse else None, _progress)
    document = prove(catalog, catalog.select(args.cases), envs, ProofRuns(args.timeout, _progress, args.jobs))
    if args.results:
        write_results(Path(args.results.format(machine=document["machine"])), document)
    print(format_proof(document))
    bad = [c["case"] for c in document["cases"] if c["verdict"] == "differs"]
    bad += [c["control"] for c in document["controls"] if c["verdict"] == "differs"]
    verdicts = [(c["case"], c.get(k, "")) for c in document["cases"] for k in ("no_harm", "no_harm_emulated")]
    verdicts += [(c["control"], c["verdict"]) for c in document["controls"] if c["verdict"] != "skipped"]
    harm = sorted({case for case, verdict in verdicts if verdict.startswith("harm")})
    checked = sum(bool(verdict) for _, verdict in verdicts)
    print(
        f"\n{len(document['cases'])} patched cases on {args.set}: {len(bad)} differ"
        + (f" ({', '.join(bad)})" if bad else "")
        + f"; {checked} run where their precondition is absent (controls included): {len(harm)} harmed"
        + (f" ({', '.join(harm)})" if harm else "")
    )
    return 1 if bad or harm else 0


def cmd_upstream_tests(args: argparse.Namespace) -> int:
    from minrepro.envs.venvs import env_python, pip_install
    from minrepro.envs.patching import apply_patches, select
    from minrepro.catalog.proof import prepare
    from minrepro.envs.upstream import (
        SELECTIONS,
        STAND_INS,
        TAGS,
        TEST_REQUIREMENTS,
        PytestConditions,
        new_failures,
        run_tests,
        tests_checkout,
        write_stand_ins,
    )

    catalog = load_catalog(args.manifest)
    version = catalog.version_set(args.set).pins().get(args.library)
    if args.library not in SELECTIONS or version is None:
        raise MinreproError(f"no upstream tests known for {args.library!r} (known: {', '.join(SELECTIONS)})")
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else None
    envs = prepare(catalog, args.set, _envs(args), wheelhouse, _progress)
    clean, patched = envs.clean, envs.patched
    ids = [pid for pid in _case_patch_ids(catalog, []) if pid.startswith(args.library + "/")]
    chosen = select(ids, catalog.sets[args.set].pins())
    apply_patches(chosen, patched)
    for env in (clean, patched):
        pip_install(env, TEST_REQUIREMENTS[args.library], wheelhouse)
    ref = args.ref or TAGS[args.library].format(version)
    cache = _envs(args).parent / "upstream"
    checkout = tests_checkout(args.library, ref, Path(args.source) if args.source else None, cache)
    selection = shlex.split(args.select) if args.select else SELECTIONS[args.library]
    stand_ins = STAND_INS.get(args.library, []) if args.offline else []
    runs, conditions = {}, PytestConditions(args.timeout, args.offline)
    for label, env in (("baseline", clean), ("patched", patched)):
        if stand_ins:  # rebuilt before each run: tests may write into them (family I did)
            write_stand_ins(args.library, clean, checkout)
        _progress(f"{args.library} tests at {ref}, {label}: {' '.join(selection)}")
        runs[label] = run_tests(env, checkout, selection, cache / f"{args.library}-{ref}-{label}.xml", conditions)
    fresh = new_failures(runs["baseline"], runs["patched"])
    print(f"{args.library} {version} ({args.set}), tests from {ref}; patches: {', '.join(p.path.name for p in chosen)}")
    print("| run | passed | failed | skipped | s |\n|---|---|---|---|---|")
    for label, run in runs.items():
        print(
            f"| {label} | {run.count('passed')} | {run.count('failed')} | {run.count('skipped')} | {run.seconds:.0f} |"
        )
    print(f"new failures with the patches: {len(fresh)}" + "".join(f"\n  {t}" for t in fresh))
    if args.results:
        write_results(
            Path(args.results),
            {
                "library": args.library,
                "version": version,
                "set": args.set,
                "ref": ref,
                "selection": selection,
                "patches": [p.path.name for p in chosen],
                "new_failures": fresh,
                "offline_stand_ins": stand_ins,
                "machine": probe(str(env_python(clean))).machine,
                "runs": {
                    k: {
                        "passed": v.count("passed"),
                        "failed": v.count("failed"),
                        "skipped": v.count("skipped"),
                        "seconds": round(v.seconds),
                        "failed_tests": sorted(t for t, o in v.outcomes.items() if o == "failed"),
                    }
                    for k, v in runs.items()
                },
            },
        )
    return 1 if fresh else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from ..catalog.run import CaseRuns
    from ..envs.validate import AlsoRun, as_json, format_report, parse_with, validate

    catalog = load_catalog(args.manifest)
    candidates = [parse_with(spec) for spec in args.with_]
    sets = [s.strip() for s in args.set.split(",") if s.strip()]
    for name in sets:
        catalog.version_set(name)
    runs = CaseRuns(args.timeout, _progress, max(1, args.jobs))
    reports = validate(catalog, candidates, sets, runs, AlsoRun(args.upstream_tests, not args.no_scenarios))
    document = as_json(candidates, reports)
    if args.results:
        write_results(Path(args.results), document)
    print(json.dumps(document) if args.json else format_report(candidates, reports))
    return 1 if document["verdict"].startswith("verdict: BREAKS") else 0


def register(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser("env", help="isolated environments that minrepro creates (the only ones it patches)")
    env_sub = env.add_subparsers(dest="env_command", required=True)
    create = env_sub.add_parser("create", help="create a venv with a version set installed")
    create.add_argument("dir", help="where the venv goes (refused if it holds anything minrepro did not make)")
    create.add_argument("--set", required=True, help="the version set to install (pinned, reporter, newest)")
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
    revert.add_argument("env", help="a venv made by `minrepro env create`")
    revert.set_defaults(func=cmd_patch_revert)
    prove = patch_sub.add_parser("prove", help="patched cases pass while their unpatched twins fail, in one run")
    prove.add_argument("cases", nargs="*", metavar="CASE", help="cases to prove (default: every case with patches)")
    prove.add_argument("--set", required=True, help="the version set whose clean and patched envs are built")
    prove.add_argument("--envs", help="where the clean and patched envs live (default: ~/.cache/minrepro/envs/prove)")
    prove.add_argument("--wheelhouse", help="install offline from this directory")
    prove.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    prove.add_argument("--results", help="write the proof as JSON here ({machine} is replaced)")
    prove.add_argument(
        "--jobs", type=int, default=1, help="cases run at a time (default 1; a patch chain stays serial)"
    )
    prove.set_defaults(func=cmd_patch_prove)

    upstream = sub.add_parser("upstream-tests", help="a library's own tests without and with its patches")
    upstream.add_argument("library", choices=["accelerate", "peft", "bitsandbytes"], help="whose tests run")
    upstream.add_argument("--set", required=True, help="the version set the tests run against")
    upstream.add_argument("--source", help="a checkout or git directory of the library (default: clone the tag)")
    upstream.add_argument("--ref", help="tag or commit of the tests (default: the set's release tag)")
    upstream.add_argument(
        "--select",
        metavar="ARGS",
        help="pytest arguments selecting tests, one string "
        '(default: the known ones), e.g. --select "tests/test_functional.py -k 4bit"',
    )
    upstream.add_argument(
        "--envs", help="where the clean and patched venvs live (default: ~/.cache/minrepro/envs/prove)"
    )
    upstream.add_argument("--wheelhouse", help="install from this directory only (offline)")
    upstream.add_argument("--timeout", type=float, default=3600, help="seconds for each pytest run")
    upstream.add_argument(
        "--offline",
        action="store_true",
        help="no hub: set HF_HUB_OFFLINE and build local "
        "stand-ins (published config, random weights) for the hub models the tests load",
    )
    upstream.add_argument("--results", help="write the comparison as JSON here")
    upstream.set_defaults(func=cmd_upstream_tests)

    validate = sub.add_parser(
        "validate",
        help="what a candidate upstream change fixes and breaks, before it is "
        "submitted: catalog cases, scenarios and the library's own tests, before and after",
    )
    validate.add_argument(
        "--with",
        dest="with_",
        action="append",
        required=True,
        metavar="LIB=SPEC",
        help="the candidate: LIB=path.diff, LIB=CHECKOUT (a source tree) or LIB=GITDIR@REF (a ref "
        "of a fetched repository); repeatable, they stack",
    )
    validate.add_argument("--set", default="pinned,newest", metavar="S1,S2", help="version sets to validate on")
    validate.add_argument("--jobs", type=int, default=1, help="cases run at a time")
    validate.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    validate.add_argument(
        "--upstream-tests",
        action="store_true",
        help="also run the library's tests for the touched files, from the candidate's own tree",
    )
    validate.add_argument("--no-scenarios", action="store_true", help="skip the tiny Gemma 4 scenarios")
    validate.add_argument("--json", action="store_true", help="print the result as one JSON object")
    validate.add_argument("--results", metavar="FILE", help="also write the JSON to FILE")
    validate.set_defaults(func=cmd_validate)
