"""Hand-off commands: `bisect` releases, draft a `report`."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ..catalog.manifest import load_catalog, script_pins
from ..catalog.targets import is_script, resolve, results_home
from ..catalog.matrix import write_matrices
from ..catalog.pages import write_docs
from ..dirs import cache, without_local_paths
from ..reports.report import REPOSITORIES
from ..catalog.run import write_results
from ..errors import MinreproError
from ..harness.runner import DEFAULT_TIMEOUT
from .common import progress as _progress


def _pins(specs: list[str]) -> dict[str, str]:
    """`--pin NAME==VERSION` options as {name: version}, or a one-line error."""
    pins = {}
    for spec in specs:
        name, sep, version = spec.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise MinreproError(f"--pin {spec!r}: write NAME==VERSION (e.g. accelerate==1.15.0)")
        pins[name.strip().lower()] = version.strip()
    return pins


def cmd_bisect(args: argparse.Namespace) -> int:
    from packaging.version import Version

    from minrepro.reports.bisect import ReleaseRuns, bisect_package, judge_for, minimal_upgrades, releases

    from minrepro.inputs import prepare_names

    catalog = load_catalog(args.manifest)
    names, _ = prepare_names([args.case] if args.case else [], args.script_args, args.module, args.python)
    if len(names) != 1:
        raise MinreproError("give one CASE or SCRIPT to bisect")
    args.case = names[0]
    [(case, _)] = resolve(catalog, [args.case], args.python, args.timeout, _progress)
    script = is_script(args.case)
    if script and args.record:
        raise MinreproError("--record writes fixed_in into the catalog's manifest; a script is not in it")
    if script and not script_pins(case.script.read_text(encoding="utf-8")):
        raise MinreproError(
            f"{case.script.name} pins no versions: write a pinned copy with "
            "`minrepro check SCRIPT --python ENV/bin/python --write-pins OUT` and bisect that"
        )
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else None
    envs = Path(args.envs).resolve() if args.envs else cache("envs")
    results_dir = (
        Path(args.results) if args.results else (results_home(case.script) if script else cache("results", "catalog"))
    )
    if args.git:
        return _bisect_git(args, case, envs, wheelhouse, results_dir)
    packages = [p.strip().lower() for p in (args.packages or args.package).split(",") if p.strip()]
    judge = judge_for(case, packages, envs, ReleaseRuns(args.timeout, wheelhouse, _progress), _pins(args.pin))
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
            print(f"{case.id}: {r.package} {r.fixed_range()} (last bad {r.last_bad}; fails at {r.bad})")
        else:
            print(f"{case.id}: {r.package} still fails at {r.good} (fails at {r.bad})")
    if len(packages) > 1:
        targets = {r.package: Version(r.first_fixed or r.good) for r in results}
        minimal = minimal_upgrades(judge, packages, targets)
        document["minimal_upgrades"] = [[f"{p}>={targets[p]}" for p in subset] for subset in minimal]
        print(
            "minimal upgrades that make it pass: "
            + ("; ".join(" + ".join(f"{p}>={targets[p]}" for p in subset) for subset in minimal) or "none")
        )
    write_results(results_dir / "bisect" / f"{case.id}.json", document)
    print(f"recorded in {results_dir / 'bisect' / (case.id + '.json')}", file=sys.stderr)
    if args.record:
        from minrepro.catalog.manifest import record_fixed_in

        ambiguous = [r.package for r in results if r.undecided]
        if ambiguous:
            raise MinreproError(
                f"not recording fixed_in: {', '.join(ambiguous)} could not be bisected to one release "
                "(see the undecided releases above)"
            )
        fixed = [f"{r.package}=={r.first_fixed}" for r in results if r.first_fixed]
        record_fixed_in(catalog.path, case.id, fixed)
        print(f"recorded fixed_in = {fixed} for {case.id} in {catalog.path}", file=sys.stderr)
        readme, catalog = Path(args.readme), load_catalog(args.manifest)
        if readme.is_file() and catalog.families:  # the family's page shows the bisection and fixed_in too
            write_docs(catalog, results_dir, readme.parent)
        elif readme.is_file():
            write_matrices(catalog, results_dir, readme)
    return 0


def _release_range(case, library: str, results_dir: Path, wheelhouse: Path | None) -> tuple[str, str]:
    """The releases a commit bisection starts from: a recorded release bisection's last bad and first fixed, else
    the case's fixed_in release and the one before it."""
    from packaging.version import Version

    from minrepro.reports.bisect import releases

    recorded = results_dir / "bisect" / f"{case.id}.json"
    if recorded.is_file():
        for row in json.loads(recorded.read_text()).get("packages", []):
            if row["package"] == library and row.get("last_bad") and row.get("first_fixed"):
                return row["last_bad"], row["first_fixed"]
    fixed = [p.split("==")[1] for p in case.fixed_in if p.split("==")[0] == library]
    if not fixed:
        raise MinreproError(
            f"no release range for {library} in {case.id}: give --range OLD..NEW (two refs), or "
            f"bisect its releases first (`minrepro bisect {case.id} --package {library}`)"
        )
    earlier = [v for v in releases(library, False, wheelhouse) if v < Version(fixed[0])]
    return str(earlier[-1]), fixed[0]


def _bisect_git(args: argparse.Namespace, case, envs: Path, wheelhouse: Path | None, results_dir: Path) -> int:
    """`bisect CASE --git LIB=GITDIR`: the first commit on the library's main between two refs that flips the case."""
    import hashlib

    from minrepro.envs.refs import parse_repo
    from minrepro.envs.venvs import create_env
    from minrepro.reports.bisect import CommitJudge, bisect_commits, release_tag

    ignored = [
        name
        for name, value in (
            ("--bad", args.bad),
            ("--good", args.good),
            ("--pin", args.pin),
            ("--record", args.record),
            ("--pre", args.pre),
        )
        if value
    ]
    if ignored:
        raise MinreproError(f"{', '.join(ignored)}: release options; with --git give the refs as --range OLD..NEW")
    repo = parse_repo(args.git)
    base = script_pins(case.script.read_text(encoding="utf-8"))
    if repo.library not in base:
        raise MinreproError(f"{case.id}'s script does not depend on {repo.library}")
    if args.range:
        older, _, newer = args.range.partition("..")
        if not newer:
            raise MinreproError(f"--range takes OLD..NEW (two refs): got {args.range!r}")
    else:
        old_release, new_release = _release_range(case, repo.library, results_dir, wheelhouse)
        base[repo.library] = old_release  # the env's metadata and dependencies: the release the range starts at
        older, newer = release_tag(repo, old_release), release_tag(repo, new_release)
    requirements = [f"{dist}=={version}" for dist, version in sorted(base.items())]
    env = envs / "bisect-git" / hashlib.sha1(" ".join(requirements).encode()).hexdigest()[:12]
    create_env(env, requirements, wheelhouse, label=f"bisect {case.id} over {repo.library} commits")
    judge = CommitJudge(
        case, repo, env, envs.parent / "bisect" / f"{case.id}-{repo.library}-commits.json", args.timeout, _progress
    )
    found = bisect_commits(judge, older, newer)
    print(f"{case.id}: {repo.library} {older}..{newer}: {found.sentence()}")
    public = REPOSITORIES.get(repo.library, repo.library)  # the record names the repository, not this machine's copy
    document = {
        "case": case.id,
        "base": base,
        "repository": public,
        **found.__dict__,
        "subjects": {c: judge.cache[c].get("subject", "") for c in found.judged},
    }
    target = results_dir / "bisect" / f"{case.id}-{repo.library}-commits.json"
    write_results(target, document)
    print(f"recorded in {target}", file=sys.stderr)
    return 0


def cmd_kit(args: argparse.Namespace) -> int:
    from minrepro.envs.refs import parse_repo
    from minrepro.reports.kit import (
        KitRuns,
        build_branch,
        describe_pr,
        kit_env,
        patch_for,
        prove,
        read_test,
        ruff_requirement,
        write_kit,
    )

    catalog = load_catalog(args.manifest)
    (case,) = catalog.select([args.case])
    if bool(args.repo) == bool(args.release):
        raise MinreproError("give the library's repository (--repo LIB=GITDIR) or a release (--release LIB==VERSION)")
    if args.release_tests and not args.release:
        raise MinreproError("--release-tests goes with --release")
    release, record = None, {}
    if args.release:
        from minrepro.envs.venvs import wheelhouse_from_env
        from minrepro.reports.release import parse_release, release_repo

        release = parse_release(args.release)
        _, test_path = patch_for(case, release.library)
        tests = Path(args.release_tests).resolve() if args.release_tests else None
        # the tree lives in the cache: a release's source is never unpacked into an env or the checkout
        repo, record = release_repo(
            release,
            [read_test(test_path).test_file],
            tests,
            cache("releases", f"{release.library}-{release.version}"),
            wheelhouse_from_env(),
        )
        _progress(f"{case.id}: {release.label}'s released source ({record['archive']}) as {repo.gitdir}")
    else:
        repo = parse_repo(args.repo)
    diffs, _ = patch_for(case, repo.library)
    out = Path(args.out) / case.id
    out.mkdir(parents=True, exist_ok=True)
    work = cache("kits", case.id)
    against = f"{release.label}'s released source" if release else "main"
    proof = build_branch(case, repo, work, against)
    proof.release = record
    proof.pytest_args = shlex.split(args.pytest_args)
    _progress(f"{case.id}: branch {proof.branch} on {repo.library} {proof.base['commit'][:12]}: {proof.port}")
    envs = Path(args.envs).resolve() if args.envs else cache("envs")
    env = kit_env(catalog, repo.library, envs, ruff_requirement(work), release.version if release else None)
    proof = prove(proof, case, work, env, KitRuns(args.timeout, _progress))
    whys = [d.read_text(encoding="utf-8").split("\n---\n")[0].split("\n\n", 1)[-1].strip() for d in diffs]
    # the PR's own fix first; a fix it builds on (F on G) after it, as the series' earlier commit
    why = whys[-1] + "".join(
        f"\n\nIt builds on an earlier commit of this series ({d.stem}):\n\n{w}"
        for d, w in zip(diffs[:-1], whys[:-1], strict=False)
    )
    write_kit(proof, work, out, describe_pr(case, proof, why))
    print(
        f"{case.id}: {'green' if proof.green else 'NOT green'}: new test {proof.test_before} -> {proof.test_after}, "
        f"case '{proof.case_before[:60]}' -> {proof.case_after[:60]}, {len(proof.file_new_failures)} new failure(s) "
        f"in {proof.test.split('::')[0]}, lint: {', '.join(f'{k} {v[:60]}' for k, v in proof.lint.items())}"
    )
    if not proof.file_measured:
        print(
            f"  none of {proof.test.split('::')[0]}'s other tests ran on main (the pytest options left none): "
            "no new failure is not shown; select a part of the file that runs, or all of it"
        )
    for label, reason in proof.test_reasons.items():
        print(f"  the new test failed {label} the fix: {reason}")
    if len(set(proof.test_reasons.values())) == 1 and len(proof.test_reasons) == 2:
        print(
            "  the same failure on both sides: the test never reached the bug. Where the environment causes it (a "
            "warning the repository turns into an error, from a newer library), --pytest-args can filter it "
            '(e.g. "-W ignore::FutureWarning")'
        )
    print(f"written: {out}/series, PR.md, proof.json; branch {proof.branch} in {work}", file=sys.stderr)
    return 0 if proof.green else 1


def cmd_report(args: argparse.Namespace) -> int:
    from minrepro.reports.report import draft, render_markdown

    catalog = load_catalog(args.manifest)
    if args.all == bool(args.cases):
        raise MinreproError("name one or more cases or scripts, or --all")
    targets = (
        [(c, None) for c in catalog.cases]
        if args.all
        else resolve(catalog, args.cases, args.python, DEFAULT_TIMEOUT, _progress)
    )
    out_dir = Path(args.out) if args.out else None
    for case, reference in targets:
        python = Path(args.python or reference) if (args.python or reference) else None
        results_dir = (
            Path(args.results) if args.results else (results_home(case.script) if case.user_script else Path("results"))
        )
        report = draft(case, catalog, results_dir, python)
        text = json.dumps(report, indent=2) if args.format == "json" else render_markdown(report)
        if out_dir is None:
            print(text)
        else:
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / f"{case.id}.{'json' if args.format == 'json' else 'md'}"
            target.write_text(without_local_paths(text) + "\n", encoding="utf-8")
            print(f"{target}: {report['repository']}: {report['title']}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    bisect = sub.add_parser("bisect", help="find the release of a package that fixed (or broke) a case or script")
    bisect.add_argument(
        "case",
        nargs="?",
        metavar="CASE|SCRIPT",
        help="a catalog case id, or a script with PEP 723 pins (its arguments after --)",
    )
    bisect.add_argument("-m", "--module", help="bisect this module's run as `python -m MODULE` (arguments after --)")
    target = bisect.add_mutually_exclusive_group(required=True)
    target.add_argument("--package", help="the package whose releases are searched")
    target.add_argument("--packages", metavar="A,B", help="joint mode: each alone, then minimal upgrade sets")
    target.add_argument(
        "--git",
        metavar="LIB=GITDIR",
        help="bisect the commits of a fetched repository (first-parent "
        "commits of its main), the library's package laid over the release the range starts at",
    )
    bisect.add_argument(
        "--range",
        metavar="OLD..NEW",
        help="with --git: the two refs (default: the release range "
        "a release bisection recorded, or the case's fixed_in and the release before)",
    )
    bisect.add_argument("--bad", help="a release on which the case fails (default: its pin)")
    bisect.add_argument("--good", help="a release on which it passes (default: the newest release)")
    bisect.add_argument("--pre", action="store_true", help="include prereleases")
    bisect.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME==VERSION",
        help="keep another package at this release instead of the script's pin (repeatable)",
    )
    bisect.add_argument("--envs", help="where the per-release venvs live (default: ~/.cache/minrepro/envs)")
    bisect.add_argument("--wheelhouse", help="install releases from this directory only (offline)")
    bisect.add_argument("--python", help="reference interpreter for a script whose pins name no set")
    bisect.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per run")
    bisect.add_argument(
        "--results",
        help="writes <results>/bisect/<case>.json (default: the cache; give results to record it in the checkout)",
    )
    bisect.add_argument("--record", action="store_true", help="write fixed_in into the manifest")
    bisect.add_argument("--readme", default="docs/catalog.md", help="the file whose matrix --record regenerates")
    bisect.set_defaults(func=cmd_bisect)

    kit = sub.add_parser(
        "kit",
        help="a PR kit: the family's fix ported to the library's main with a regression test, "
        "proved there (the test fails before, passes after; no new failure in its file; ruff)",
    )
    kit.add_argument("case", help="a catalog case with a patch and a regression test (patches/<lib>/<name>.test)")
    kit.add_argument("--repo", metavar="LIB=GITDIR[@REF]", help="the fetched repository (default ref: its HEAD, main)")
    kit.add_argument(
        "--release",
        metavar="LIB==VERSION",
        help="instead of --repo: the release's source (its sdist, else its wheel), downloaded and committed in the "
        "cache; the kit says it was made against that release, not main",
    )
    kit.add_argument(
        "--release-tests",
        metavar="DIR",
        help="with --release: test files the release's archive lacks (the regression test's file and what it "
        "imports), in the repository's layout as at the release's tag; the kit records each with its sha256",
    )
    kit.add_argument("--out", default="results/kits", help="where <case>/ is written (default results/kits)")
    kit.add_argument("--envs", help="where the kit's env lives (default: ~/.cache/minrepro/envs)")
    kit.add_argument("--timeout", type=float, default=1800, help="seconds per test run")
    kit.add_argument(
        "--pytest-args",
        default="",
        metavar="ARGS",
        help="extra pytest options for every run, recorded in the proof (e.g. \"-W 'ignore:`is_gradient_"
        "checkpointing` is deprecated:FutureWarning'\" where a fetched main predates a deprecation of "
        "the newest transformers; -W escapes the module field, so match the message)",
    )
    kit.set_defaults(func=cmd_kit)

    report = sub.add_parser("report", help="draft an issue for the right repository (never posts anything)")
    report.add_argument("cases", nargs="*", metavar="CASE|SCRIPT", help="catalog case ids or script paths")
    report.add_argument("--all", action="store_true", help="every catalog case")
    report.add_argument("--format", choices=["md", "json"], default="md", help="Markdown, or the sections as JSON")
    report.add_argument("--out", help="write one file per case into this directory (default: print)")
    report.add_argument(
        "--results",
        help="recorded runs, bisections and proofs (default: results/ for a case, "
        "the cache `check SCRIPT --set ...` wrote to for a script)",
    )
    report.add_argument("--python", help="interpreter of the env the case ran in, for `transformers env` etc.")
    report.set_defaults(func=cmd_report)
