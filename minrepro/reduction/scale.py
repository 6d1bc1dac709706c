"""The scale-down phase of `minrepro reduce`, execution side: one traced cold run of the script records what it
loaded (model class and config, adapter config) and every device map it used; `minrepro.reducers.scale` proposes
tiny twins from that record; the reduction's own oracle judges them (the same signature where it fails, a pass
where the bug is fixed). At real scale each text candidate costs a full load; after it, seconds."""

from __future__ import annotations

import ast
import json
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..harness.runner import RunResult, run_script
from ..reducers.passes import fewer_layers
from ..reducers.scale import TOWER_GONE, VOCAB_FIELD, Plan, plan_from_trace, scale_down
from .guard import JUDGING_RUNS  # the guard takes a twin's runs where the bug is fixed as its own


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
    refused: list[Refusal] = field(default_factory=list)  # steps of the ladder refused where the bug is fixed
    rung: str = ""  # the step of the ladder the twin was taken from

    def to_json(self) -> str:
        return json.dumps(
            {
                "source": self.source,
                "description": self.description,
                "kept": self.kept,
                "runs": self.runs,
                "original": self.original,
                "refused": [[r.rung, r.why] for r in self.refused],
                "rung": self.rung,
            }
        )

    @classmethod
    def from_json(cls, text: str, path: Path) -> ScaleDown:
        data = json.loads(text)
        refused = [Refusal(rung, why) for rung, why in data.get("refused", [])]
        return cls(
            data["source"],
            data["description"],
            data["kept"],
            data["runs"],
            path,
            data["original"],
            refused=refused,
            rung=data.get("rung", ""),
        )


@dataclass(frozen=True)
class Refusal:
    """A step of the twin's ladder refused where the bug is fixed: the twin failed there otherwise than the bug,
    an artifact of its shrink (`why`: the failure's final line and the twin's line it came from)."""

    rung: str
    why: str

    def __str__(self) -> str:
        return f"the twin with {self.rung} fails where the bug is fixed: {self.why}"


def where_it_failed(run: RunResult, source: str) -> str:
    """A failing run as a person reads it: its final line, and the script's line the failure came from."""
    headline = (run.raw_headline or (run.signature.headline if run.signature else "")).splitlines()
    what = headline[0] if headline else "failed"
    if run.signature is not None and run.signature.kind == "timeout":
        what = f"timed out after {run.seconds:.0f} s"
    lines = source.splitlines()
    line = run.script_lines[-1] if run.script_lines else None
    if line is None or not 0 < line <= len(lines):
        return what
    text = lines[line - 1].strip()
    return f"{what} (at `{text[:77] + '...' if len(text) > 80 else text}`)"


@dataclass
class TwinJudge:
    """A twin is judged in both worlds: it fails with the original's signature where the script fails
    (`bad`), and where the bug is fixed it runs to its end (`goods`: python -> whether the user named it, so that
    the original is known to pass there). Where it fails there otherwise than the bug, the step is refused, and why
    is kept; where it fails there the same way in an env the guard has not judged yet, the guard decides.
    `run_good(sources, python, jobs)`: each source's cold runs there. The good runs of a batch go beside its bad runs
    where the slots hold them (every twin's, else the first's), else after; then, in order, for each twin the bad
    world accepts until one holds. The next step's first twins (`on_rung`'s `ahead`) run beside a step's first batch
    where the slots hold every run of both at once; their answers wait for that step."""

    bad: Callable[[list[str]], list[bool]]
    goods: dict[str, bool]
    run_good: Callable[[list[str], str, int], list[RunResult]]
    matches: Callable[[RunResult], bool]
    jobs: int = 1
    say: Callable[[str], None] = lambda text: None
    room: int = 0  # runs the cores hold at once, where a twin's small memory is no limit
    rung: str = ""
    refused: list[Refusal] = field(default_factory=list)
    good_runs: dict[str, dict[str, list[RunResult]]] = field(default_factory=dict)  # twin -> python -> runs
    shared: bool = True  # the step's twins share its shrink: one refused where the bug is fixed refuses the step
    step_refused: bool = False
    skipping: bool = False  # a step not worth its runs (see `on_rung`)
    ahead: list[str] = field(default_factory=list)  # the next step's first twins, run beside this step's first batch

    def on_rung(self, name: str, shared: bool = True, ahead: Sequence[str] = ()) -> None:
        # delta debugging looks for the fields the *failure* needs at real size: where the ladder's last step failed
        # where the bug is fixed instead, its twins would each pay good runs to learn what real scale gives at once
        self.skipping = not shared and self.step_refused
        self.rung, self.shared, self.step_refused, self.ahead = name, shared, False, list(ahead)
        if self.skipping:
            self.say("scale-down: the ladder's last step failed where the bug is fixed: no delta debugging, real scale")

    def __call__(self, sources: list[str]) -> list[bool]:
        if not self.goods:
            return self.bad(sources)
        if self.step_refused or self.skipping:  # the step's other twins keep the artifact: the next step
            return [False] * len(sources)
        beside = JUDGING_RUNS * len(self.goods)
        # the good runs go beside the batch's bad runs where the slots hold them: every twin's, else the first's. A
        # ladder step's twins are small, so they may take the cores `jobs` kept from the original's memory, and the
        # first's runs all go at once even past the cores: they share them, and none waits for the slowest's slot
        small = max(self.room, 1 + beside) if self.shared else 0
        slots = max(self.jobs, small)
        # the next step's first twins beside this step's first batch, where the slots hold all their runs at once: a
        # step refused where the bug is fixed then costs no second round of cold runs; one that holds, idle cores only
        following = [text for text in self.ahead if text not in sources]
        together, self.ahead = len(sources) + len(following), []
        if following and slots >= together * (1 + beside) and self.jobs >= together:
            self.say(f"scale-down: the next step's {len(following)} twin(s) judged beside this step's, on idle cores")
        else:
            following = []
        batch = [*sources, *following]
        good_first = batch if slots >= len(batch) * (1 + beside) else sources[:1]
        if slots >= len(batch) + beside:
            with ThreadPoolExecutor(1) as pool:
                bad = pool.submit(self.bad, batch)
                self._judge_good(good_first, spare=slots - len(batch))
                answers = bad.result()[: len(sources)]
        else:
            answers = self.bad(sources)
        for i, text in enumerate(sources):  # then, in order, the twins the bad world accepts: the first that holds
            if not answers[i]:
                continue
            self._judge_good([text], spare=self.jobs)
            if self._holds(text):
                return [j == i for j in range(len(sources))]  # the first in order wins; the rest are not needed
            answers[i] = False
            if self.step_refused:
                break
        return [yes and not self.step_refused for yes in answers]

    def _judge_good(self, sources: list[str], spare: int) -> None:
        todo = [text for text in sources if set(self.goods) - set(self.good_runs.get(text, {}))]
        if not todo:
            return
        per_env = max(1, spare // max(1, len(self.goods)))
        with ThreadPoolExecutor(max(1, len(self.goods))) as pool:
            found = {
                py: pool.submit(self.run_good, [t for t in todo for _ in range(JUDGING_RUNS)], py, per_env)
                for py in self.goods
            }
            for python, future in found.items():
                runs = future.result()
                for i, text in enumerate(todo):
                    mine = runs[JUDGING_RUNS * i : JUDGING_RUNS * (i + 1)]
                    self.good_runs.setdefault(text, {})[python] = mine

    def _holds(self, text: str) -> bool:
        """Whether the twin's runs where the bug is fixed leave it standing; a refusal is kept, and said."""
        for python, named in self.goods.items():
            runs = self.good_runs.get(text, {}).get(python, [])
            failed = [run for run in runs if run.signature is not None]
            if not failed:
                continue
            if not named and all(self.matches(run) for run in failed):
                continue  # the same failure in an env not yet judged on the original: the guard decides
            refusal = Refusal(self.rung or "its fields shrunk", where_it_failed(failed[0], text))
            self.step_refused = self.shared and bool(self.rung)  # twins judged outside a step: each alone
            if refusal not in self.refused:
                self.refused.append(refusal)
                self.say(f"scale-down: {refusal}")
            return False
        return True


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
    source: str,
    run: RunResult,
    test_many: Callable[[list[str]], list[bool]],
    log: Callable[[str], None],
    on_rung: Callable[..., None] | None = None,
) -> ScaleDown | None:
    """The twin the oracle accepts, or None (nothing loaded from a checkpoint, or no twin keeps the failure).
    `on_rung`: told each step of the ladder before its twins are judged."""
    plan = plan_from_trace(run.trace, source)
    if plan is None:
        return None
    runs = [0]

    def first_interesting(candidates: Sequence[str]) -> int | None:
        runs[0] += len(candidates)  # judged together (the executor's jobs); the first in order wins
        return next((i for i, yes in enumerate(test_many(list(candidates))) if yes), None)

    log(f"scale-down: {len(plan.loads)} model load(s), {len(plan.fields)} fields to shrink")
    if plan.live_lines and VOCAB_FIELD in plan.fields:
        lines, first = source.splitlines(), plan.live_lines[0]
        call = lines[first - 1].strip() if 0 < first <= len(lines) else "a call"
        log(
            f"scale-down: no step with the vocabularies shrunk: the twin runs the tokenizer at `{call[:60]}` (its ids "
            "differ between calls, or the run never reached it), and its ids would fall past a shrunk vocabulary"
        )
    how: dict[str, str] = {}  # a cut twin's text -> how its layers were cut

    def cuts(text: str) -> list[str]:
        found = layer_cuts(text)
        how.update(found)
        return list(found)

    found = scale_down(source, plan, first_interesting, cuts, on_rung)
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
