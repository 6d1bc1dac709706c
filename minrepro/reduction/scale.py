"""The scale-down phase of `minrepro reduce`, execution side: one traced cold run of the script records what it
loaded (model class and config, adapter config) and every device map it used; `minrepro.reducers.scale` proposes
tiny twins from that record; the reduction's own oracle judges them (the same signature where it fails, a pass
where the bug is fixed). At real scale each text candidate costs a full load; after it, seconds."""

from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Sequence

from ..harness.runner import RunResult, run_script
from ..reducers.passes import fewer_layers
from ..reducers.scale import TOWER_GONE, VOCAB_FIELD, Plan, plan_from_trace, scale_down


@dataclass
class ScaleDown:
    source: str  # the twin script (the search starts from it)
    description: str  # what was rebuilt, for the summary and the notes
    kept: list[list[str]]  # dimension fields the failure needs at their real size
    runs: int  # candidates judged
    path: Path | None = None  # where the twin is written (the guard runs it)
    original: str = ""  # digest of the script it is the twin of (a memo of an earlier edit is stale)
    # its runs in each --good-python env while it was judged (the guard takes them); not kept in the memo
    good_runs: dict[str, list[RunResult]] = field(default_factory=dict)
    bad_run: RunResult | None = None  # its cold run where the script fails (what verifying it costs); not kept either

    def to_json(self) -> str:
        return json.dumps(
            {
                "source": self.source,
                "description": self.description,
                "kept": self.kept,
                "runs": self.runs,
                "original": self.original,
            }
        )

    @classmethod
    def from_json(cls, text: str, path: Path) -> ScaleDown:
        data = json.loads(text)
        return cls(data["source"], data["description"], data["kept"], data["runs"], path, data["original"])


def describe(plan: Plan, kept: list[tuple[str, ...]]) -> str:
    loads = ", ".join(load.model_class for load in plan.loads)
    maps = len([load for load in plan.loads if load.device_map]) + len(plan.dispatches)
    towers = [p for p in kept if p[-1] == TOWER_GONE]
    sizes = [p for p in kept if p[-1] != TOWER_GONE]
    kept_text = (f"; kept at real size: {', '.join('.'.join(p[1:]) for p in sizes)}" if sizes else "") + (
        f"; kept, shrunk: {', '.join(p[-2].removesuffix('_config') + ' tower' for p in towers)}" if towers else ""
    )
    vocabulary = ""
    if VOCAB_FIELD in plan.fields and VOCAB_FIELD not in kept:
        size = plan.vocabulary
        vocabulary = (
            f", vocabularies at {size} with {len(plan.ids or ())} token ids mapped into them" if size else ""
        ) + (f", {len(plan.replaceable)} tokenizer call(s) replaced by what they returned" if plan.replaceable else "")
    return (
        f"scaled down: {loads} rebuilt as a tiny twin ({len(plan.fields) - len(kept)} of {len(plan.fields)} "
        f"fields shrunk{kept_text}){vocabulary}, {len(plan.adapters)} adapter(s) rebuilt, {maps} device map(s) "
        "made literal"
    )


def traced_run(source: str, python: str, timeout: float, workdir: Path, home: Path) -> RunResult:
    """The current program once, cold, with the placement trace (what `_bootstrap` records)."""
    path = workdir / "scale.py"
    path.write_text(source, encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="minrepro-cwd-") as scratch:
        return run_script(path, python=python, timeout=timeout, cwd=scratch, path0=home, trace=True)


def try_scale_down(
    source: str, run: RunResult, test_many: Callable[[list[str]], list[bool]], log: Callable[[str], None]
) -> ScaleDown | None:
    """The twin the oracle accepts, or None (nothing loaded from a checkpoint, or no twin keeps the failure)."""
    plan = plan_from_trace(run.trace, source)
    if plan is None:
        return None
    runs = [0]

    def first_interesting(candidates: Sequence[str]) -> int | None:
        runs[0] += len(candidates)  # judged together (the executor's jobs); the first in order wins
        return next((i for i, yes in enumerate(test_many(list(candidates))) if yes), None)

    log(f"scale-down: {len(plan.loads)} model load(s), {len(plan.fields)} fields to shrink")
    how: dict[str, str] = {}  # a cut twin's text -> how its layers were cut

    def cuts(text: str) -> list[str]:
        found = layer_cuts(text)
        how.update(found)
        return list(found)

    found = scale_down(source, plan, first_interesting, cuts)
    if not found:
        return None
    layers = f", layers cut to {how[found[0]]}" if found[0] in how else ""
    return ScaleDown(found[0], describe(plan, found[1]) + layers, [list(p) for p in found[1]], runs[0])


LAYER_CUTS = {True: "one of each type per run of a device", False: "one per run of a device and a type"}


def layer_cuts(source: str) -> dict[str, str]:
    """A twin's layer stacks cut as `fewer_layers` cuts them in the search, every map's stack in turn, text -> how:
    one layer of each type per run of a device, then (where that is not the same) one layer per run of a device and
    a type."""
    texts = []
    for per_kind in LAYER_CUTS:
        tree = ast.parse(source)
        for _ in range(len(tree.body)):  # one stack per step; each step leaves one fewer to cut
            shorter = next(fewer_layers(tree, per_kind), None)
            if shorter is None:
                break
            tree = shorter
        texts.append(ast.unparse(tree) + "\n")
    if texts[0] == texts[1]:  # no types to keep apart: the runs of a device, said so
        return {texts[1]: LAYER_CUTS[False]}
    return dict(zip(texts, LAYER_CUTS.values(), strict=True))
