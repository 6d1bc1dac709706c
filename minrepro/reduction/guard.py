"""The guard of a reduction: what makes the oracle differential. A candidate is interesting only if it fails with
the original's signature in the bad environment *and* not in a good one, where the bug is fixed.

Chosen in this order, the original having to pass the same check first:
  1. the interpreters named with --good-python;
  2. the patched environment of the catalog family whose signature and owner match the original's (the fix of this
     very failure: judged first and alone, and where it passes no other environment runs);
  3. a release where the original passes: the environment of another version set (created in the cache);
  4. a necessity control: with the script's call into the library on the failing stack cut, the failure must
     vanish (only for failures a library raised);
  5. none: the result is marked unguarded, loudly, and values feeding the script's own checks are frozen.
"""

from __future__ import annotations

import ast
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from ..catalog.manifest import Catalog, load_catalog
from ..envs.venvs import set_env
from ..errors import MinreproError
from ..harness.executors import ColdExecutor
from ..harness.probe import HF_STACK, Environment
from ..harness.runner import RunResult
from ..harness.signature import Signature
from ..reducers.source import imported_modules

HF_LIBRARIES = HF_STACK
JUDGING_RUNS = 2  # runs of a subject in a good env before it counts as passing there: a flaky pass is no pass


@dataclass(frozen=True)
class Guard:
    kind: str  # "good-env" | "necessity" | "none"
    why: str  # what it is, for the summary and the output's header
    pythons: tuple[str, ...] = ()  # good interpreters (kind "good-env")

    @property
    def guarded(self) -> bool:
        return self.kind in ("good-env", "necessity")

    def key(self) -> list[str]:
        """What the answer cache must be keyed on: an unguarded answer is not a guarded one."""
        return [self.kind, *self.pythons]


UNGUARDED = Guard("none", "unguarded: no environment where the bug is fixed, and no library call to cut")
UNDECIDED = Guard("undecided", "not decided: the reduction stopped before the guard judged an environment")


class OutOfTime(Exception):
    """The time budget cannot hold the guard's runs: what is left, and what a run there is known to take."""


def neutralise_library_call(source: str, run: RunResult) -> str | None:
    """The necessity control for one candidate: the statement at the script's innermost own frame on the failing
    stack (its call into the library) replaced by `pass` (an assignment keeps its names, bound to None)."""
    if not run.script_lines:
        return None
    line = run.script_lines[-1]
    tree = ast.parse(source)
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
        and not isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try))
    ]
    if not found:
        return None
    target = min(found, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
    if isinstance(target, (ast.Assign, ast.AnnAssign)):
        names = target.targets if isinstance(target, ast.Assign) else [target.target]
        replacement: ast.stmt = ast.Assign(names, ast.Constant(None), lineno=target.lineno)
    else:
        replacement = ast.Pass()
    for parent in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and target in block:
                block[block.index(target)] = replacement
                return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    return None


@dataclass
class GuardSearch:
    """Everything `choose_guard` needs, so that each way of finding a good environment is a small function."""

    script: Path
    source: str
    signature: Signature
    headline: str  # the original's raw final line, which the catalog's regexes are written against
    matches: Callable[[RunResult], bool]
    bad: Environment
    timeout: float
    log: Callable[[str], None]
    catalog: Catalog | None = None
    notes: list[str] | None = None
    jobs: int = 2  # the two runs at once where memory allows (the driver measures it)
    passing_seconds: float = 0.0  # the slowest passing run seen: a pass runs to the end, a failure may stop early
    home: Path | None = None  # where the user's script lives (its imports); default: the judged script's folder
    known: dict[str, list[RunResult]] = field(default_factory=dict)  # runs of `script` made already, per python
    until: float | None = None  # no run past this (the time budget's end); a run it cuts leaves the guard undecided
    least: float = 0.0  # what a run of the subject takes at the least (where the script fails: it stops early)

    def passes_in(self, python: str) -> bool:
        return not self.why_not_passing(python)

    def why_not_passing(self, python: str) -> str:
        """ "" if the original passes under `python`, twice (a flaky pass is no pass), else what it met there.
        Passes, not merely "fails otherwise": an earlier bug that masks this one (B before A on pinned) is no
        fixed world."""
        if not self.known.get(python):
            self.known[python] = self._runs(python)
        runs = self.known[python]
        failed = [r for r in runs if r.signature is not None]
        if not failed:
            self.passing_seconds = max([self.passing_seconds, *(r.seconds for r in runs)])
            return ""
        first = failed[0]
        what = (
            f"timed out after {self.timeout:.0f} s"
            if first.signature.kind == "timeout"
            else f"failed with {first.raw_headline.splitlines()[0] if first.raw_headline else first.signature.headline}"
        )
        return f"{what} in {len(failed)} of {len(runs)} runs ({', '.join(f'{r.seconds:.0f} s' for r in runs)})"

    def _runs(self, python: str) -> list[RunResult]:
        timeout = self.timeout
        if self.until is not None:
            left = self.until - time.monotonic()
            if left < self.least:
                raise OutOfTime(
                    f"{left:.0f} s of the time budget were left, and a run of the subject takes at least "
                    f"{self.least:.0f} s"
                )
            timeout = min(timeout, left)
        runs = ColdExecutor(python, min(JUDGING_RUNS, self.jobs)).run_many(
            [self.script] * JUDGING_RUNS, timeout, self.home or self.script.parent
        )
        if timeout < self.timeout and any(r.signature is not None and r.signature.kind == "timeout" for r in runs):
            raise OutOfTime(f"a run where the bug may be fixed was still going when the budget ended ({timeout:.0f} s)")
        return runs

    def prefetch(self, pythons: list[str]) -> None:
        """Run the subject in each of these envs side by side (as many envs at once as `jobs` holds pairs of runs),
        so that the guard's search in order then reads answers: on a GPU box its three envs for newest's failure
        took 86 s one after another."""
        todo = [py for py in dict.fromkeys(pythons) if py not in self.known]
        if len(todo) < 2 or self.jobs < 4:
            return
        with ThreadPoolExecutor(max(1, self.jobs // 2)) as pool:
            self.known.update(zip(todo, pool.map(self._runs, todo), strict=False))

    def note(self, text: str) -> None:
        self.log(text)
        if self.notes is not None:
            self.notes.append(text)


def named_pythons(search: GuardSearch, pythons: list[str]) -> Guard | None:
    for python in pythons:
        if why := search.why_not_passing(python):
            raise MinreproError(
                f"the original does not pass under --good-python {python}: it {why}, so it cannot "
                "stand for a world where the bug is fixed"
            )
    if not pythons:
        return None
    return Guard(
        "good-env", "passes under " + "; ".join(describe_env(py, search.bad) for py in pythons), tuple(pythons)
    )


def describe_env(python: str, bad: Environment) -> str:
    """A good env as a maintainer can rebuild it: the releases that differ from the bad env's (all of them where none
    differs) and, for an env minrepro made, its patches; never a local interpreter path."""
    from ..envs.venvs import env_of, read_marker
    from ..harness.probe import probe

    versions = {k: v for k, v in probe(python).versions.items() if v is not None and k != "tokenizers"}
    changed = {k: v for k, v in versions.items() if bad.versions.get(k) != v} or versions
    text = ", ".join(f"{k} {v}" for k, v in sorted(changed.items()))
    patches = (read_marker(env_of(python)) or {}).get("patches") or []
    if patches:
        text += f" with {len(patches)} minrepro patch{'es' if len(patches) > 1 else ''} ({', '.join(patches)})"
    return text or "the environment given with --good-python (no library of the HF stack in it differs)"


def other_version_set(search: GuardSearch) -> Guard | None:
    """A set where the original passes (another release line), its env made once in the cache."""
    return next((guard for python, guard in version_set_envs(search) if search.passes_in(python)), None)


def version_set_envs(search: GuardSearch) -> list[tuple[str, Guard]]:
    """Each other version set's env, with the guard it would be."""
    if not imported_modules(search.source) & HF_LIBRARIES or search.catalog is None:
        return []
    current = search.catalog.detect_set(search.bad.versions)
    found = []
    for name in _other_sets(search.catalog, current):
        python = _set_env(search, name, patched=False)
        if python:
            found.append(
                (python, Guard("good-env", f"passes on the {name} set ({_pins(search.catalog, name)})", (python,)))
            )
    return found


def guard_env_sets(versions: dict[str, str | None], imported: set[str]) -> list[tuple[str, bool]]:
    """The envs the guard may need, in the order it tries them, as (version set, patched): the current set patched,
    then the other version sets. `versions`: the bad env's (its probe); `imported`: the script's top-level imports
    (`imported_modules`, read by the caller's thread: this runs in the background)."""
    if not imported & HF_LIBRARIES:
        return []
    catalog = load_catalog()
    current = catalog.detect_set(versions)
    first = [(current, True)] if current is not None else []
    return first + [(name, False) for name in _other_sets(catalog, current)]


def make_guard_envs(sets: list[tuple[str, bool]], note: Callable[[str], None]) -> None:
    """Make `sets` (`guard_env_sets`) in the cache. The driver runs this while the original's cold runs go: on a fresh
    box each env takes a minute or more to make, which the guard would otherwise wait for one after another."""
    catalog = load_catalog() if sets else None
    for name, patched in sets:
        set_env(catalog, name, patched, note)


def _other_sets(catalog: Catalog, current: str | None) -> list[str]:
    """The version sets other than the bad env's, newest first: a release that fixed it is the likeliest."""
    return sorted((s for s in catalog.sets if s != current), key=lambda s: s != "newest")


def patched_family(search: GuardSearch) -> Guard | None:
    """The catalog family this failure belongs to (same signature regex and owner): its patched environment."""
    return next((guard for python, guard in patched_family_envs(search) if search.passes_in(python)), None)


def patched_family_envs(search: GuardSearch) -> list[tuple[str, Guard]]:
    if search.catalog is None:
        return []
    owner = str(search.signature.owner or "")
    family = [
        c
        for c in search.catalog.cases
        if c.patches and c.owner in (None, owner) and _headline_matches(c.signature, search)
    ]
    current = search.catalog.detect_set(search.bad.versions)
    if not family or current is None:
        return []
    python = _set_env(search, current, patched=True)
    why = f"passes with the {family[0].family} patches ({family[0].id}) on {current}"
    return [(python, Guard("good-env", why, (python,)))] if python else []


def family_fix_env(search: GuardSearch, good_pythons: list[str], mode: str) -> str | None:
    """The env `choose_guard` will judge first where it is the catalog's fix of this very failure (the family's
    patched env), the likeliest to pass: the driver starts its warm pool while the judgement runs. None where
    the user named the good envs, the guard is off, or no family matches."""
    if good_pythons or mode != "auto":
        return None
    if search.catalog is None:
        search.catalog = load_catalog()
    envs = patched_family_envs(search)
    return envs[0][0] if envs else None


def necessity_control(search: GuardSearch) -> Guard | None:
    if search.signature.raised_by != "library":
        return None  # the script raised it itself (a check): there is no library call on the stack to cut
    return Guard("necessity", "necessity control: with the script's call into the library cut, the failure vanishes")


def _headline_matches(pattern: str, search: GuardSearch) -> bool:
    return re.search(pattern, search.headline) is not None


def _pins(catalog: Catalog, name: str) -> str:
    return ", ".join(f"{k} {v}" for k, v in catalog.sets[name].pins().items() if k != "tokenizers")


def _set_env(search: GuardSearch, name: str, patched: bool) -> str | None:
    try:
        return str(set_env(search.catalog, name, patched, search.note))
    except MinreproError as exc:
        search.note(f"guard: no {name}{' patched' if patched else ''} environment ({exc})")
        return None


# The catalog's fix for this very failure first (where a family's signature and owner match): it is the precise
# fixed world, and where it passes no other env needs a run (on 2 cores the other sets' runs took 20 s of a 32 s guard)
SEARCH_ORDER: list[Callable[[GuardSearch], Guard | None]] = [patched_family, other_version_set, necessity_control]
# the envs the first two of SEARCH_ORDER judge: the first alone, then, where it does not pass, the others side by side
# before the search in order reads them
GOOD_ENV_CANDIDATES: list[Callable[[GuardSearch], list[tuple[str, Guard]]]] = [patched_family_envs, version_set_envs]


def good_env_candidates(search: GuardSearch) -> list[str]:
    """The envs the guard may judge, in its order (the family's fix, then the other version sets)."""
    if search.catalog is None:
        search.catalog = load_catalog()
    return list(dict.fromkeys(python for envs in GOOD_ENV_CANDIDATES for python, _ in envs(search)))


def first_good_env(search: GuardSearch, good_pythons: list[str], mode: str) -> str | None:
    """The env `choose_guard` judges first in mode "auto", where the user named none: a twin is judged there in the
    scale-down, before the guard takes its runs."""
    if good_pythons or mode != "auto":
        return None
    if search.catalog is None:
        search.catalog = load_catalog()
    for envs in GOOD_ENV_CANDIDATES:  # the first of the first kind that has one: the others are not made here
        found = envs(search)
        if found:
            return found[0][0]
    return None


def choose_guard(search: GuardSearch, good_pythons: list[str], mode: str) -> Guard:
    """The guard for a reduction: named interpreters, else the first of SEARCH_ORDER that holds (mode "auto"),
    else none. The caller checks the original against the chosen guard before the search starts."""
    if good_pythons:
        return named_pythons(search, good_pythons)
    if mode == "none":
        return UNGUARDED
    first = first_good_env(search, good_pythons, mode)
    # the likeliest alone: its runs have the box to themselves, and the other envs are made only where it fails
    if first is not None and not search.passes_in(first):
        search.prefetch([python for python in good_env_candidates(search) if python != first])
    for find in SEARCH_ORDER:
        guard = find(search)
        if guard is not None:
            return guard
    return UNGUARDED
