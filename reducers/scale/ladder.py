"""The twin's ladder: the twins to try, from the most shrunk to the least, each judged by the caller; then delta
debugging over the fields kept at their real size."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ddmin import ddmin
from .ids import VOCAB_FIELD
from .plan import TOWER_GONE, Path_, Plan
from .twin import twin_source

FirstInteresting = Callable[[Sequence[str]], "int | None"]


@dataclass(frozen=True)
class Rung:
    """One step of the twin's ladder: the fields every twin of this step keeps at their real size (besides what a
    step's own tries keep), named for a person."""

    name: str
    kept: tuple[Path_, ...] = ()


def ladder(plan: Plan) -> list[Rung]:
    """The twins to try, from the most shrunk to the least: what the run never reached where it failed may still be
    read where the bug is fixed (prompt ids past the failure, labels, a file of ids), and a twin whose vocabulary is
    shrunk past them fails there with an artifact of the shrink. Real scale is the step after the last."""
    shrunk = Rung("every dimension, layer and vocabulary shrunk")
    if VOCAB_FIELD not in plan.fields:
        return [shrunk]
    kept = Rung("dimensions and layers shrunk, vocabularies and token ids kept", (VOCAB_FIELD,))
    return [kept] if plan.live_lines else [shrunk, kept]  # live ids fall past a shrunk vocabulary


def scale_down(
    source: str,
    plan: Plan,
    first_interesting: FirstInteresting,
    cut: Callable[[str], list[str]] | None = None,
    on_rung: Callable[..., None] | None = None,
) -> tuple[str, list[Path_]] | None:
    """The smallest twin that is still interesting, and the fields it had to keep at their real size; None when
    no twin is. The ladder's steps in order (`ladder`), each as one batch per layer cut then the uncut twins; then
    delta debugging over the fields kept at real size, and the result checked once more (ddmin assumes the whole
    set is interesting: it need not be, the maps are literal there and were inferred in the original). `cut`:
    further shrinks of a twin's text (its layers), the smallest first. `on_rung(name, shared=True, ahead=())`: told
    each step before its candidates are judged (the judge says why a step was refused); `shared`: the step's twins
    share its shrink, so that one refused where the bug is fixed refuses the step; `ahead`: the next step's first
    batch, which a judge with free slots may run beside this step's first (asked for again, its answers are kept)."""
    fields = plan.fields

    def twin(kept: Sequence[Path_]) -> str | None:
        return twin_source(source, plan, set(fields) - set(kept))

    if twin([]) is None:  # a recorded call is not in the script: no twin of any step
        return None
    rungs = ladder(plan)
    steps = [_batches(twin, fields, rung, cut) for rung in rungs]
    for at, (rung, batches) in enumerate(zip(rungs, steps, strict=True)):
        if on_rung is not None:
            following = steps[at + 1][0] if at + 1 < len(steps) and steps[at + 1] else []
            on_rung(rung.name, ahead=[text for text, _ in following])
        for batch in batches:
            found = first_interesting([text for text, _ in batch])
            if found is not None:
                return batch[found]
    if on_rung is not None:  # its twins shrink different fields: a refusal of one says nothing of the others
        on_rung("the fields the failure needs at their real size, found by delta debugging", False)

    def first_kept(candidates: Sequence[list[Path_]]) -> int | None:
        sources = [twin(kept) for kept in candidates]
        found = first_interesting([s for s in sources if s is not None])
        return None if found is None else [i for i, s in enumerate(sources) if s is not None][found]

    kept = ddmin(list(fields), first_kept)
    final = twin(kept)
    return (final, kept) if final is not None and first_interesting([final]) == 0 else None


def _batches(
    twin: Callable[[Sequence[Path_]], str | None],
    fields: list[Path_],
    rung: Rung,
    cut: Callable[[str], list[str]] | None,
) -> list[list[tuple[str, list[Path_]]]]:
    """One step of the ladder as the batches to judge in order, each a list of (twin, fields kept at real size)."""
    # towers cut to one small layer, and gone, in one batch side by side: a twin without a tower the failure needs
    # would send the step to delta debugging (gpu-gemma4-e4b-eval in benchmarks/results/scale/defaults.jsonl)
    towers = [path for path in fields if path[-1] == TOWER_GONE]
    kept = list(rung.kept)
    first = twin([*kept, *towers])
    if first is None:
        return []
    without = twin(kept) if towers else None
    tries = [(without, kept), (first, [*kept, *towers])] if without is not None else [(first, [*kept, *towers])]
    # the twin's layers cut first: every cold run after it (the guard's, the verification's) and the search's
    # first candidates then build a few layers, not all of them. A batch per cut, the smallest first; then uncut
    cuts = [[c for c in (cut(text) if cut is not None else []) if c != text] for text, _ in tries]
    batches = [
        [(shorter[step], kept) for shorter, (_, kept) in zip(cuts, tries, strict=True) if step < len(shorter)]
        for step in range(max(map(len, cuts)))
    ]
    return [*batches, tries]
