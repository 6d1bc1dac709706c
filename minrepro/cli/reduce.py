"""Reduction commands: `reduce` a script (or a scenario preset), print a script's `signature`, and `matches`,
the same oracle as a command for other reducers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import MinreproError
from ..harness.placement import placement_lines
from ..harness.resources import FIRST_RUN_TIMEOUT
from ..harness.runner import DEFAULT_TIMEOUT, run_script
from ..reduction.budget import DEFAULT_BUDGET
from ..reduction.options import GOOD_RUNS
from .common import AfterAWhile
from .common import progress as _progress


def cmd_signature(args: argparse.Namespace) -> int:
    from ..catalog.targets import read_source
    from ..inputs import Invocation, prepare, refuse_own_failure, take_env
    from ..reduction.phases.establish import refuse_missing_libraries

    prepared = prepare(args.script, args.module, args.python, Invocation(args.script_args))
    take_env(prepared)
    script = prepared.path if prepared else Path(args.script)
    source = read_source(script)  # a syntax error is bad input, not a failure to sign
    result = run_script(
        script,
        python=args.python,
        timeout=args.timeout,
        trace=args.placement,
        path0=prepared.home if prepared else None,
    )
    refuse_missing_libraries(result, source, args.python or "this interpreter")
    refuse_own_failure(result, prepared.name if prepared else script.name)
    if result.signature is None and not args.placement:
        raise MinreproError(
            f"{prepared.name if prepared else args.script} does not fail: nothing to sign (exit 0 in "
            f"{result.seconds:.1f} s)"
        )
    if args.json:
        signed = (
            {}
            if result.signature is None
            else {
                "headline": result.raw_headline,
                "signature": result.signature.to_dict(),
                "owner": str(result.signature.owner),
            }
        )
        print(
            json.dumps(
                {
                    **signed,
                    "seconds": round(result.seconds, 2),
                    **({"trace": list(result.trace)} if args.placement else {}),
                }
            )
        )
        return 0
    if result.signature is None:  # --placement: a pass says which branch it stood on
        print(f"passed (exit {result.returncode} in {result.seconds:.1f} s)")
    else:
        print(result.signature)
        print(f"  owner: {result.signature.owner}")
    if args.placement:
        print("\n".join(placement_lines(result.trace)))
    return 0


def cmd_matches(args: argparse.Namespace) -> int:
    """Exit 0 iff the candidate fails with the expected signature (and, for each --good-python, does not
    fail with it there): an interestingness test for other reducers (Shrink Ray, pysource-minimize, C-Vise)
    that is the same differential oracle `minrepro reduce --good-python` uses."""
    from minrepro.harness.signature import Signature

    try:
        data = json.loads(Path(args.expect).read_text(encoding="utf-8"))
        # what `signature --json` prints wraps the signature with its headline and owner: take either form
        expected = Signature.from_dict(data.get("signature", data))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MinreproError(f"cannot read the expected signature from {args.expect}: {exc}") from None
    if run_script(args.candidate, python=args.python, timeout=args.timeout).signature != expected:
        return 1
    for good in args.good_python:  # run only once the bad env has matched: most candidates stop above
        if run_script(args.candidate, python=good, timeout=args.timeout).signature == expected:
            return 1
    return 0


def cmd_reduce(args: argparse.Namespace) -> int:
    from minrepro.reduction.driver import reduce_script
    from minrepro.reduction.options import ReduceOptions
    from minrepro.reduction.summary import print_summary

    if args.jobs is not None and args.jobs < 1:
        raise MinreproError("--jobs must be at least 1")
    given = args.script is not None or args.module is not None or bool(args.script_args)
    if given + (args.scenario is not None) + (args.spec is not None) != 1:
        raise MinreproError(
            "give one of: a SCRIPT (or NOTEBOOK.ipynb, -m MODULE, a command line after --) to "
            "reduce, --scenario PRESET, --spec FILE"
        )
    if args.max_seconds is not None and args.max_seconds <= 0:
        raise MinreproError("--max-seconds must be positive")
    if args.scenario is not None or args.spec is not None:
        if args.max_seconds is not None:
            raise MinreproError("--max-seconds applies to a SCRIPT's reduction, not to --scenario or --spec")
        args.jobs = args.jobs or 1
        return _reduce_scenario(args)
    if args.oracle and (args.good_python or args.guard != "auto" or args.good_runs is not None):
        raise MinreproError(
            "--good-python, --good-runs and --guard judge signatures; a command --oracle decides by itself"
        )
    if args.confirm_runs < 2:
        raise MinreproError("--confirm-runs must be at least 2 (one run cannot tell a flaky failure)")
    if args.good_runs is not None and args.good_runs < 1:
        raise MinreproError("--good-runs must be at least 1")
    if args.guard == "none" and args.good_runs is not None:
        raise MinreproError("--good-runs counts runs in a good env; --guard none has none")
    from minrepro.inputs import Invocation, prepare, take_env

    prepared = prepare(args.script, args.module, args.python, Invocation(args.script_args))
    take_env(prepared)
    options = ReduceOptions(
        **_shared_options(args),
        script=prepared.path if prepared else Path(args.script),
        signature=args.signature,
        oracle=args.oracle,
        timeout=args.timeout,
        confirm_runs=args.confirm_runs,
        triggers=not args.no_triggers,
        scale_down=not args.no_scale_down,
        max_seconds=DEFAULT_BUDGET if args.max_seconds is None else args.max_seconds,
        argv=getattr(args, "argv", None),
        prepared=prepared,
    )
    summary = reduce_script(
        options, log=_progress if args.verbose else lambda _: None, say=_progress if args.verbose else AfterAWhile()
    )
    print_summary(summary, args.json)
    return 0


def _shared_options(args: argparse.Namespace) -> dict:
    """The options a script's and a scenario's reduction read alike."""
    return {
        "out": Path(args.out) if args.out else None,
        "python": args.python,
        "jobs": args.jobs,
        "seed": args.seed,
        "executor": args.executor,
        "workdir": Path(args.workdir) if args.workdir else None,
        "fresh": args.fresh,
        "reuse_workers": not args.fresh_workers,
        "good_pythons": list(args.good_python),
        "guard": args.guard,
        "good_runs": args.good_runs,
    }


def _reduce_scenario(args: argparse.Namespace) -> int:
    from minrepro.reduction.options import ReduceOptions
    from minrepro.reduction.summary import print_summary
    from minrepro.scenarios.reduce import ScenarioTarget, reduce_scenario

    options = ReduceOptions(**_shared_options(args), script=Path("-"), timeout=args.timeout or DEFAULT_TIMEOUT)
    log = _progress if args.verbose else lambda _: None
    if args.spec is not None:  # a spec file: what `explore` writes for a finding
        from minrepro.scenarios.reduce import reduce_spec
        from minrepro.scenarios.spec import scale_of

        spec = _read_spec(Path(args.spec))
        args.scenario, args.scale = Path(args.spec).stem.removesuffix(".spec"), scale_of(spec) or "tiny"
        which = ScenarioTarget(args.scenario, args.scale, args.device)
        trip, summary = reduce_spec(spec, which, options, args.keep_steps, log)
    else:
        which = ScenarioTarget(args.scenario, args.scale, args.device)
        trip, summary = reduce_scenario(which, options, args.keep_steps, log)
    print(
        f"scenario {args.scenario} ({args.scale}, {args.device}): {len(trip.steps) - 1} spec steps "
        f"({', '.join(name for name, _, _ in trip.steps[1:]) or 'none accepted'}), {trip.runs} scenario runs"
    )
    print_summary(summary, args.json)
    return 0


def _read_spec(path: Path):
    from minrepro.scenarios.spec import Scenario

    try:
        return Scenario.from_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MinreproError(f"cannot read spec {path}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise MinreproError(f"{path} is not a scenario spec (JSON as `explore` writes it): {exc}") from None


def register(sub: argparse._SubParsersAction) -> None:
    signature = sub.add_parser("signature", help="run a script and print its failure signature")
    signature.add_argument("script", nargs="?", help="the script (or NOTEBOOK.ipynb) to run; its arguments follow --")
    signature.add_argument("-m", "--module", help="run this module as `python -m MODULE` would (arguments after --)")
    signature.add_argument("--python", help="interpreter whose environment runs it (default: this one)")
    signature.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before it counts as a timeout"
    )
    signature.add_argument("--json", action="store_true", help="print it as JSON (what `matches --expect` reads)")
    signature.add_argument(
        "--placement",
        action="store_true",
        help="also say what the run placed where: each load's map, each accelerate dispatch and its "
        "hooks, and on failure the devices of the modules and tensors on the failing stack "
        "(a passing script prints this too, instead of an error)",
    )
    signature.set_defaults(func=cmd_signature)

    matches = sub.add_parser("matches", help="exit 0 iff a script fails with a recorded signature (an oracle)")
    matches.add_argument("--expect", required=True, help="JSON of the signature (as `signature --json` prints)")
    matches.add_argument("candidate", help="the script to judge")
    matches.add_argument("--python", help="interpreter whose environment runs it (default: this one)")
    matches.add_argument(
        "--good-python",
        action="append",
        default=[],
        metavar="PY",
        help="an interpreter where the bug is fixed: the candidate must not match there (repeatable)",
    )
    matches.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before it counts as a timeout")
    matches.set_defaults(func=cmd_matches)

    reduce = sub.add_parser("reduce", help="shrink a failing script, keeping its failure signature")
    reduce.add_argument(
        "script",
        nargs="?",
        help="the failing script or NOTEBOOK.ipynb (never modified); the "
        "arguments of its run follow --, or the whole command line does: `-- accelerate launch job.py "
        "ARGS`",
    )
    reduce.add_argument("-m", "--module", help="reduce this module's run as `python -m MODULE` (arguments after --)")
    reduce.add_argument(
        "--scenario", metavar="PRESET", help="start from a seed scenario (see `minrepro scenario list`)"
    )
    reduce.add_argument("--spec", metavar="FILE", help="start from a scenario spec file (an `explore` finding's)")
    reduce.add_argument("--scale", default="tiny", choices=["tiny", "e2b", "e4b"], help="scenario model scale")
    reduce.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="scenario placement family")
    reduce.add_argument("--keep-steps", action="store_true", help="keep every accepted scenario step beside the output")
    reduce.add_argument(
        "-o", "--out", help="output path (default: <stem>.min.py beside SCRIPT; in the current folder for -m)"
    )
    reduce.add_argument(
        "--signature",
        metavar="REGEX",
        help="keep candidates whose final exception line matches REGEX (type and library frames still required)",
    )
    reduce.add_argument(
        "--oracle", metavar="CMD", help="interestingness command; gets the candidate path, exit 0 means interesting"
    )
    reduce.add_argument("--python", help="interpreter to run candidates with (default: this one)")
    reduce.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="runs side by side (default: as many as the cores, the RAM and the GPU memory hold for "
        "the runs measured, at most 8; the progress says what was chosen and why)",
    )
    reduce.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per run (default: 3x the slowest cold run of the original, at least "
        f"{DEFAULT_TIMEOUT:g}; its first run may take {FIRST_RUN_TIMEOUT:g})",
    )
    reduce.add_argument("--seed", type=int, default=0, help="order in which proposals are tried")
    reduce.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        metavar="S",
        help=f"a SCRIPT's reduction ends within S seconds (default {DEFAULT_BUDGET:g}; 'inf' for no "
        "limit): the cold verification's time is kept from the search, whose best by then is "
        "verified and written, marked 'maybe not minimal' if the search was cut",
    )
    reduce.add_argument(
        "--executor",
        default="auto",
        choices=["auto", "forkserver", "warm-pool", "cold"],
        help="how candidates run, each in its own process either way (auto: the warm pool where the "
        "env's torch sees a GPU, else the fork server)",
    )
    reduce.add_argument(
        "--fresh-workers",
        action="store_true",
        help="a warm-pool worker runs one candidate and exits (default: it runs the next one where the last "
        "left it as a fresh interpreter would be, unless the script patches an imported module)",
    )
    reduce.add_argument(
        "--good-python",
        action="append",
        default=[],
        metavar="PY",
        help="an interpreter where the bug is fixed (repeatable): a candidate must not fail the "
        "same way there (default: found automatically, see --guard)",
    )
    reduce.add_argument(
        "--guard",
        choices=["auto", "none"],
        default="auto",
        help="auto: a version set or the catalog family's patched env where the original passes, "
        "else a necessity control; none: reduce unguarded (values feeding checks frozen)",
    )
    reduce.add_argument(
        "--confirm-runs",
        type=int,
        default=3,
        metavar="N",
        help="cold runs that must all fail the same way (default 3): the original's; from 3 up, the last is a "
        "tiny twin's where one stands",
    )
    reduce.add_argument(
        "--good-runs",
        type=int,
        default=None,
        metavar="N",
        help=f"runs of each candidate in each good env that must all pass (default: {GOOD_RUNS} when "
        "the script's own check raised and the script seeds nothing, else 1; the result's cold "
        f"check runs {GOOD_RUNS}): a candidate that only sometimes passes where the bug is fixed "
        "is not the bug",
    )
    reduce.add_argument("--no-triggers", action="store_true", help="skip the trigger report after the search")
    reduce.add_argument(
        "--no-scale-down",
        action="store_true",
        help="reduce at the checkpoint's real size (default: first try a tiny twin of each model the "
        "script loads, with the device maps its run inferred made literal)",
    )
    reduce.add_argument(
        "--workdir", help="cache and state directory (default: in the cache, $MINREPRO_CACHE or ~/.cache/minrepro)"
    )
    reduce.add_argument("--fresh", action="store_true", help="ignore a previous run's cache and state")
    reduce.add_argument("--json", action="store_true", help="end with a JSON summary line")
    reduce.add_argument("-v", "--verbose", action="store_true", help="log passes and accepted steps")
    reduce.set_defaults(func=cmd_reduce)
