"""How a generator pass is run: `greedy` (the first interesting proposal, then ask again; with `chain`, every
proposal taken in turn goes first), `sweep` (every proposal judged where the script fails, those that fail the
same way merged) and `together` (several passes' edits as one candidate)."""

from __future__ import annotations

import ast
import difflib

from ..search import Problem, ShadowFull
from ..source import merge_edits
from .common import Generator, Pass, _render


def greedy(generate: Generator, chain: bool = False) -> Pass:
    """Run a generator pass: accept the first interesting proposal, ask again, until none is. With `chain`, every
    proposal taken in turn (`_chained`, untested) goes first among them: where each would be accepted anyway (three
    functions to inline, two `with` blocks to unwrap) that is one round instead of one per edit, and it rides in a
    batch of `jobs` candidates that runs at once (a round costs at least a run of the script where it fails)."""

    def run(problem: Problem) -> None:
        # edits judged before the one taken, this turn and earlier ones (`Problem.refused_by`): not judged again
        refused = problem.refused_by(run)
        earlier = frozenset(refused)
        while True:
            rendered = (_render(t) for t in generate(ast.parse(problem.current)))
            candidates = problem.order([c for c in rendered if c is not None])
            combined = _chained(generate, problem.current) if chain and len(candidates) > 1 else None
            if combined is not None and combined not in candidates:
                candidates.insert(0, combined)
            edits = [_edit(problem.current, c) for c in candidates]
            fresh = [i for i, edit in enumerate(edits) if edit not in refused]
            problem.skipped += sum(edit in earlier for edit in edits)
            judgeable = {i for i in fresh if problem.judgeable(candidates[i])}
            found = problem.first_interesting([candidates[i] for i in fresh])
            refused.update(edits[i] for i in (fresh if found is None else fresh[:found]) if i in judgeable)
            if found is None:
                return
            problem.accept(candidates[fresh[found]])

    run.__name__ = generate.__name__
    run.__doc__ = generate.__doc__
    return run


def sweep(generate: Generator) -> Pass:
    """Run a generator pass whose edits are small and mostly refused (an argument, a dict entry, an attribute read):
    every proposal is judged where the script fails (`Problem.screen`), then those that fail the same way go
    together (`merge_edits`) as one candidate, then in halves and quarters, then one by one (`_halvings`); the first
    taken starts the next sweep. Taken one at a time (`greedy`), each edit costs a batch or more of bad runs and a
    good run in turn; a sweep pays the good run once for the edits it merges (`docs/benchmarks.md`, "The sweep and
    the optimistic guard")."""

    def run(problem: Problem) -> None:
        # edits judged and not taken, this turn and earlier ones (`Problem.refused_by`): not judged again
        refused = problem.refused_by(run)
        earlier = frozenset(refused)
        # edits that failed the same way where the script fails, this turn: after another edit is taken they go
        # straight to the merge, not to the screen again (else the same edits are screened once per edit taken)
        screened: set[tuple] = set()
        while True:
            rendered = (_render(t) for t in generate(ast.parse(problem.current)))
            candidates = problem.order([c for c in rendered if c is not None])
            edits = [_edit(problem.current, c) for c in candidates]
            fresh = [i for i, edit in enumerate(edits) if edit not in refused]
            problem.skipped += sum(edit in earlier for edit in edits)
            spans = [_span_edit(problem.current, c) for c in candidates]
            unknown = [i for i in fresh if spans[i] not in screened]
            passed = {unknown[i] for i in problem.screen([candidates[i] for i in unknown])}
            hits = [i for i in fresh if i in passed or spans[i] in screened]
            refused.update(edits[i] for i in unknown if i not in passed and problem.judgeable(candidates[i]))
            screened.update(spans[i] for i in hits)
            if not hits:
                return
            tries: list[tuple[str, list[int]]] = []  # (candidate, the hits it makes), largest first
            for group in _halvings(hits):
                # as the current program is written (a rendered candidate lacks its final newline: an edit of the
                # last token would otherwise take that newline too, and collide with every other edit)
                merged, taken = merge_edits(problem.current, [candidates[i].rstrip("\n") + "\n" for i in group])
                if taken > 1 and merged not in (t for t, _ in tries):
                    tries.append((merged, group))
            tries += [(candidates[i], [i]) for i in hits]
            found = problem.first_interesting([t for t, _ in tries])
            # the single edits refused where the bug is fixed
            refused.update(edits[members[0]] for _, members in tries[:found] if len(members) == 1)
            if found is None:
                return
            problem.accept(tries[found][0])

    run.__name__ = generate.__name__
    run.__doc__ = generate.__doc__
    return run


def _edit(before: str, after: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A candidate as the lines it takes out and puts in: after another edit is taken elsewhere, a refused edit
    proposes the same lines again (each edit taken sends the turn back to its start, and without this key every
    refused edit would be judged again). One whose lines the taken edit changed is another edit. The pass keeps
    them across its turns until the search forgets (`Problem.forget`), so the round that ends the search judged every
    edit: the fixpoint is the same kind."""
    old, new = before.splitlines(), after.splitlines()
    out: list[str] = []
    put: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            out += old[i1:i2]
            put += new[j1:j2]
    return tuple(out), tuple(put)


def _halvings(hits: list[int], levels: int = 3) -> list[list[int]]:
    """All the hits, then halves, then quarters (groups of two or more): where the edits taken together are refused
    (two that each keep the failure but not both, or one refused where the bug is fixed), the largest group without
    the culprit is taken in the same batch of runs, not one edit per sweep."""
    groups, parts = [], 1
    for _ in range(levels):
        size = -(-len(hits) // parts)
        if size < 2:
            break
        groups += [hits[k : k + size] for k in range(0, len(hits), size)]
        parts *= 2
    return [g for g in groups if len(g) > 1]


def _span_edit(before: str, after: str) -> tuple[str, str, int]:
    """A candidate as the text it takes out and puts in, and which occurrence of that text: unlike `_edit`'s lines,
    often the same when another edit on its line was taken (`f(a=1, b=2, c=3)` without `b=2` is `('b=2, ', '', 0)`,
    and so is `f(b=2, c=3)` without it), not always (`f(a=1, b=2)` without it is `(', b=2', '', 0)`): a key that
    changes costs one more screen. One that stays while an earlier copy of its text goes may stand for another
    edit: that edit skips the screen, and is judged in full all the same."""
    before, after = before.rstrip("\n"), after.rstrip("\n")  # a rendered candidate lacks the final newline
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1
    removed = before[start : len(before) - end]
    return removed, after[start : len(after) - end], before.count(removed, 0, start) if removed else start


def _chained(generate: Generator, source: str, limit: int = 32) -> str | None:
    """The pass's first proposal applied, then the first proposal on that, and so on (at most `limit` edits); None
    unless it made more than one edit (one edit is a proposal already)."""
    current, edits = source, 0
    for _ in range(limit):
        following = next(
            (r for r in map(_render, generate(ast.parse(current))) if r is not None and r != current), None
        )
        if following is None:
            break
        current, edits = following, edits + 1
    return current if edits > 1 else None


def together(name: str, *passes: Pass) -> Pass:
    """The passes' edits, each taken as if it were accepted (`Problem.shadow`), as one candidate; nothing if it is
    not interesting (the passes then run one by one). Otherwise each rewrite that only restructures (unwrap
    `main()`, inline it, drop the environment's settings) is a step of its own before the slice, each costing a bad
    and a good run one after another."""

    def run(problem: Problem) -> None:
        shadow = problem.shadow()
        try:
            for each in passes:
                each(shadow)
        except ShadowFull:
            pass
        if shadow.current != problem.current and problem.first_interesting([shadow.current]) is not None:
            problem.accept(shadow.current)

    run.__name__ = name
    run.__doc__ = f"{name}: {', '.join(p.__name__ for p in passes)}, in one candidate"
    return run
