"""Scenario commands: `scenario list|render|table|matrix` over the seeds' Gemma 4 presets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..catalog.manifest import load_catalog
from ..catalog.run import write_results
from ..envs.venvs import env_of, read_marker
from ..errors import MinreproError
from ..harness.probe import probe
from ..harness.runner import DEFAULT_TIMEOUT
from .common import progress as _progress


def cmd_scenario(args: argparse.Namespace) -> int:
    from ..scenarios.presets import presets
    from ..scenarios.render import render

    if args.action == "matrix":
        return _scenario_matrix(args)
    if args.readme or args.check:
        raise MinreproError("--readme and --check are for `minrepro scenario matrix`")
    if args.spec:
        if args.action != "render" or args.presets:
            raise MinreproError("--spec is for `minrepro scenario render --spec FILE` (no presets)")
        from .reduce import _read_spec

        print(render(_read_spec(Path(args.spec))), end="")
        return 0
    available = presets(args.device, args.scale)
    if args.action == "list":
        for name, spec in available.items():
            extra = {k: v for k, v in spec.peft.kwargs.items() if k != "offload_dir"}
            machine = f" machine={spec.machine}" if spec.machine else ""
            print(
                f"{name:24} {spec.peft.call:16} {spec.action:17} device_map={spec.placement.device_map}"
                + (f" peft={extra}" if extra else "")
                + machine
            )
        return 0
    names = args.presets or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise MinreproError(f"unknown scenario preset(s): {', '.join(unknown)} (known: {', '.join(available)})")
    if args.action == "render":
        for name in names:
            print(render(available[name]))
        return 0
    # table: run each preset here; the signature each hits
    from ..scenarios.table import PresetEnv, PresetsAt, checkpoint_namespace, describe_placement, scenario_table

    env = probe(args.python)
    set_name = load_catalog(args.manifest).detect_set(env.versions)
    # a minrepro env records the patches applied to it
    patches = (read_marker(env_of(args.python)) or {}).get("patches", []) if args.python else []
    measured = _measured_rows(Path(args.results), env, patches) if args.results and not args.fresh else []
    if measured:
        _progress(
            f"resuming {args.results}: {len(measured)} preset(s) measured there already (--fresh runs them again)"
        )

    def record(rows: list[dict]) -> None:
        row = rows[-1]
        _progress(
            f"{row['preset']}: {row['outcome']} {row['headline'][:80]} ({row['seconds']:.0f} s); "
            f"{describe_placement(row.get('placement', []))}"
        )
        if args.results:  # rows of presets not asked for this time stay in the file
            kept = [r for r in measured if r["preset"] not in names]
            order = {name: i for i, name in enumerate(available)}
            write_results(
                Path(args.results),
                {
                    "set": None,
                    "scenario_set": set_name,
                    "machine": env.machine,
                    "gpu": env.gpu,
                    "versions": env.versions,
                    "patches": patches,
                    "rows": sorted(kept + rows, key=lambda r: order.get(r["preset"], len(order))),
                },
            )

    where = PresetEnv(env.python, args.timeout, checkpoint_namespace(env.versions, patches), patches)
    rows = scenario_table(PresetsAt(names, args.scale, args.device), where, record, measured)
    print("| preset | set | scale | outcome | signature | owner | placement | s |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['preset']} | {set_name} | {r['scale']} | {r['outcome']} | {r['headline'][:90]} | {r['owner']} | "
            f"{describe_placement(r.get('placement', []))} | {r['seconds']} |"
        )
    return 0


def _scenario_matrix(args: argparse.Namespace) -> int:
    """Print the seed-scenario tables from recorded results, or write them into the README's block."""
    from ..scenarios import matrix as scenario_matrix

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
            raise MinreproError(
                f"{readme}'s scenario tables are stale: run `minrepro scenario matrix --readme {readme}`"
            )
    elif args.readme:
        scenario_matrix.write_readme(source, catalog, Path(args.readme))
        print(f"scenario tables written to {args.readme}", file=sys.stderr)
    else:
        print(scenario_matrix.render(source, catalog))
    return 0


def _measured_rows(path: Path, env, patches: list[str]) -> list[dict]:
    """Rows of an earlier table in the same environment (versions, machine, patches), for a run cut short. A row
    recorded before runs were traced cannot say which branch it took: it is measured again."""
    if not path.is_file():
        return []
    doc = json.loads(path.read_text())
    same = (doc.get("versions"), doc.get("machine"), doc.get("gpu"), doc.get("patches", [])) == (
        env.versions,
        env.machine,
        env.gpu,
        patches,
    )
    return [row for row in doc.get("rows", []) if "placement" in row] if same else []


def register(sub: argparse._SubParsersAction) -> None:
    scenario = sub.add_parser("scenario", help="the seeds' Gemma 4 scenarios as specs: list, render, run")
    scenario.add_argument(
        "action",
        choices=["list", "render", "table", "matrix"],
        help="list the presets, render them as scripts, run them into a table, or render the recorded tables",
    )
    scenario.add_argument(
        "presets", nargs="*", metavar="PRESET", help="presets (default: all of this device and scale)"
    )
    scenario.add_argument(
        "--spec", metavar="FILE", help="render: a spec file (what `explore` writes) instead of presets"
    )
    scenario.add_argument(
        "--scale",
        default="tiny",
        choices=["tiny", "e2b", "e4b"],
        help="model dimensions: tiny, or a released checkpoint's text config",
    )
    scenario.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="the placement family: GPU/CPU splits, or their CPU-only analogues",
    )
    scenario.add_argument("--python", help="interpreter whose environment runs the scenarios (default: this one)")
    scenario.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds per scenario run (the checkpoint build not counted)",
    )
    scenario.add_argument(
        "--results",
        help="table: also write the rows as JSON here; presets it holds from the same environment are not run again",
    )
    scenario.add_argument("--fresh", action="store_true", help="table: run every preset, ignoring rows in --results")
    scenario.add_argument(
        "--from", dest="source", default="results/scenarios", help="matrix: the recorded tables and reductions"
    )
    scenario.add_argument("--readme", help="matrix: write the tables into this README's scenarios block")
    scenario.add_argument("--check", action="store_true", help="matrix: fail if the README's block is not up to date")
    scenario.set_defaults(func=cmd_scenario)
