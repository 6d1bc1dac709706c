"""Delta debugging (Zeller's ddmin), complement-first, with candidates evaluated in ordered batches."""

from __future__ import annotations

from typing import TypeVar
from collections.abc import Callable, Sequence

T = TypeVar("T")
FirstInteresting = Callable[[Sequence[list[T]]], "int | None"]


def _chunks(items: list[T], n: int) -> list[list[T]]:
    n = min(n, len(items))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def ddmin(items: list[T], first_interesting: FirstInteresting) -> list[T]:
    """A 1-minimal sublist of ``items`` that is still interesting.

    ``first_interesting(candidates)`` answers the index of the first interesting candidate (in order) or
    None. The input itself is assumed interesting. When ddmin stops at single-element granularity every
    one-element removal has been tried and rejected, so the result is 1-minimal."""
    n = 2
    while items:
        chunks = _chunks(items, n)
        complements = [[x for j, c in enumerate(chunks) if j != i for x in c] for i in range(len(chunks))]
        found = first_interesting(complements)
        if found is not None:
            items = complements[found]
            n = max(n - 1, 2)
            continue
        if len(chunks) >= len(items):
            break
        n = min(len(items), 2 * n)
    return items
