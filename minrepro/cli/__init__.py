"""The `minrepro` command line: one module per command group (catalog, drift, reduce, envs, scenarios, reports), each
registering its commands with their arguments beside their implementation. Errors a user can fix are one line
on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import MinreproError
from ..reduction.driver import Interrupted
from . import catalog, drift, envs, explore, reduce, reports, scenarios

GROUPS = (catalog, drift, reduce, envs, scenarios, explore, reports)
TAKE_ARGUMENTS = {"reduce", "check", "signature", "bisect"}  # `COMMAND SCRIPT -- ARGS`: the user's run's arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minrepro", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"minrepro {__version__}")
    parser.add_argument(
        "--manifest", help="catalog manifest (default: the bundled minrepro/catalog/cases/catalog.toml)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..inputs import split_arguments

    given = list(sys.argv[1:] if argv is None else argv)
    own, script_args = split_arguments(given)
    args = build_parser().parse_args(own)
    args.script_args = script_args
    args.argv = given  # as given: what a stopped reduction's resume repeats
    try:
        if script_args and args.command not in TAKE_ARGUMENTS:
            raise MinreproError(
                f"arguments after -- are a script's: {', '.join(sorted(TAKE_ARGUMENTS))} take them, not {args.command}"
            )
        return args.func(args)
    except Interrupted as exc:  # Ctrl-C in a reduction: where the best script went, how to resume
        print(f"minrepro: {exc}", file=sys.stderr)
        return 130
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
