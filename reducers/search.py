"""The search: a `Problem` holds the current best script and answers which proposals are interesting.

Passes propose; the oracle (`reducers.oracle.Oracle`, or any plain `test_many`) decides. Nothing here runs code,
so executors, caching and parallelism change without touching a pass (the Lithium seam)."""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from .oracle import Oracle, PlainOracle, Retraction, TestMany, Verdict, plain
from .source import code_lines, normalize

MAX_ROUNDS = 50
# A pass whose turns cost candidates and changed nothing this many times in a row is retired for the rest of the
# search: otherwise a pass with nothing left to take pays for a batch of candidates every round (each pass's seconds
# and turns: `docs/benchmarks.md`, "Reducing at real scale").
FRUITLESS_TURNS = 2


@functools.lru_cache(maxsize=1024)  # a pass asks `judgeable` of the candidates it then sends: parsed once
def _normalized(source: str) -> str | None:
    try:
        return normalize(source)
    except SyntaxError:
        return None


def assert_conditions(source: str) -> list[str]:
    """The conditions of the script's `assert` statements, in order (their messages may shrink)."""
    return [ast.unparse(node.test) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assert)]


def check_data(source: str) -> list[str]:
    """The values the script's own checks read: for every name an `assert` condition (or the test of an `if` that
    raises) reads, the assignments that bind it, as written. A tolerance is data: shrunk to 0.0 it makes a check
    that fails on anything. Frozen unless a differential oracle can judge the change."""
    tree = ast.parse(source)
    tests = [n.test for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    tests += [n.test for n in ast.walk(tree) if isinstance(n, ast.If) and any(isinstance(b, ast.Raise) for b in n.body)]
    read = {n.id for t in tests for n in ast.walk(t) if isinstance(n, ast.Name)}
    bound = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in read for t in node.targets)
            and not any(isinstance(n, ast.Call) for n in ast.walk(node.value))
        ):  # data, not computation
            bound.append(ast.unparse(node))
    return sorted(bound)


def _module_level(tree: ast.AST, wanted: type) -> Iterator[ast.AST]:
    """Nodes of type `wanted` outside function and class bodies."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, wanted):
            yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            yield from _module_level(node, wanted)


# Calls that seed a random generator (`torch.manual_seed(0)`, `random.Random(cfg["seed"])`, `set_seed(1)`)
SEEDING = {"manual_seed", "manual_seed_all", "seed", "set_seed", "Random", "RandomState", "default_rng"}


def seeding_calls(source: str) -> Counter:
    """How many seeding calls the script makes, by (function, number of arguments); `Random()` seeds nothing."""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    names = [(c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", ""), c) for c in calls]
    return Counter(
        (name, len(c.args) + len(c.keywords)) for name, c in names if name in SEEDING and (c.args or c.keywords)
    )


_BUILTINS = frozenset(dir(__import__("builtins"))) | {"__file__", "__name__", "__doc__", "__builtins__"}


def unbound_names(source: str) -> frozenset[str]:
    """Names the program reads but binds nowhere (scope-blind, so it under-reports): a candidate that adds one
    fails with NameError wherever it reads it, often after the slow statements. Refused without a run."""
    tree = ast.parse(source)
    bound, loaded = set(_BUILTINS), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return frozenset(loaded - bound)


@dataclass(frozen=True)
class SearchSettings:
    """How the search treats a program: `jobs` runs at a time (a pass's candidates judged in batches of `jobs`, a
    screen's all together), in an order seeded by `seed`; with
    `freeze_check_data` the values the script's own checks read never change (no differential oracle can tell a
    weakened check from a kept bug); with `keep_seeds` every seeding call stays."""

    jobs: int = 1
    seed: int = 0
    freeze_check_data: bool = False
    keep_seeds: bool = False


class Problem:
    def __init__(
        self,
        source: str,
        oracle: Oracle | TestMany,
        settings: SearchSettings = SearchSettings(),  # frozen: one shared default is safe
        on_accept: Callable[[str], None] = lambda _: None,
    ):
        self.current = source
        self.history = [source]  # every program accepted, in order (`retract` goes back along it)
        self.oracle, self.on_accept = plain(oracle), on_accept
        self.jobs, self.seed = max(1, settings.jobs), settings.seed
        freeze_check_data, keep_seeds = settings.freeze_check_data, settings.keep_seeds
        self.accepted: set[str] = {source}
        self.lines = code_lines(source)
        self.unbound = unbound_names(source)
        self.checks = assert_conditions(source)
        # without a differential oracle nothing can tell a weakened check from a kept bug: its data is frozen
        self.frozen = check_data(source) if freeze_check_data else None
        # a failure the script's own check raises depends on values: with a seed dropped it holds by chance, and
        # a good environment passes by chance too (eval_then_export's reduction passed twice where the bug is
        # fixed and failed there one run in two cold). Every seeding call stays (inlining may copy one: >=).
        self.seeds = seeding_calls(source) if keep_seeds else Counter()
        self.tried = 0  # candidates sent to the oracle (progress), each once: a screened one judged later is one
        self._sent: set[str] = set()
        # Edits each pass refused, by pass (`refused_by`), kept across its turns: an argument the failure needs would
        # be judged again in every round while other passes take lines (`docs/benchmarks.md`, "Refused edits
        # remembered, screens streamed"). A round that changes nothing forgets them (`forget`), so the round that ends
        # the search judges every edit: its fixpoint is the same. Only what the oracle judged is kept (`judgeable`):
        # an edit refused without a run (a name it leaves unbound) may become admissible once another line goes.
        self._refused: dict[object, set] = {}
        self.skipped = 0  # proposals left unjudged because an earlier turn of their pass refused them
        # What a run of the current program showed, as plain data (the driver measures it; see `Facts`):
        # "failing_statement" (the top-level statement the failure went through, as unparsed), "values"
        # ({"args.steps": "3"}: reads that always had that literal value), "heavy" (slow top-level statements),
        # "executed" (the module-level lines that ran), "function_lines" (the lines of the script's own functions and
        # methods that ran; None where not recorded).
        self.measure: Facts | None = None

    @property
    def facts(self) -> dict:
        """What a run of the current program showed (measured when first asked after a change; the driver caches
        its measurements by program, so asking twice costs nothing)."""
        return self.measure(self.current) if self.measure else {}

    def order(self, candidates: Iterable[str]) -> list[str]:
        """Unique candidates in a seeded order that depends only on (seed, current source)."""
        unique = list(dict.fromkeys(candidates))
        digest = hashlib.sha256(f"{self.seed}:{self.current}".encode()).hexdigest()
        random.Random(digest).shuffle(unique)
        return unique

    def admissible(self, normalized: str) -> bool:
        """Never revisit an accepted program (no cycles), never grow in code lines, never read a name nothing
        binds (a NameError costs a whole run: 14 of lowmem_chat_server's 155), and keep every assertion condition
        as written: they are the script's own oracle (a reducer that turns `error < 0.05` into
        `error < 0.0` gets a "repro" that fails on anything)."""
        return (
            normalized not in self.accepted
            and code_lines(normalized) <= self.lines
            and unbound_names(normalized) <= self.unbound
            and self._checks_kept(normalized)
            and (not self.seeds or seeding_calls(normalized) >= self.seeds)
        )

    def _checks_kept(self, normalized: str) -> bool:
        """Every assertion condition as written. An assert that never ran in the failing run is not this failure's
        oracle and may go whole (otherwise the passes rewrite the code it reads, which never runs either: a reduced
        script kept `changed = sorted()` before its `assert not changed`, and failed with a TypeError where the bug
        is fixed); the data of those that stay stays frozen."""
        checks = assert_conditions(normalized)
        if checks == self.checks:
            return self.frozen is None or not checks or check_data(normalized) == self.frozen
        remaining = iter(self.checks)
        if not all(check in remaining for check in checks):  # a subsequence: nothing reworded or reordered
            return False
        unrun = set(self._unrun_checks())
        return all(check in unrun for check in set(self.checks) - set(checks)) and (
            self.frozen is None or set(check_data(normalized)) <= set(self.frozen)
        )

    def _unrun_checks(self) -> list[str]:
        """Conditions of the current program's module-level asserts none of whose lines ran in the failing run (the
        driver traces module-level lines only: an assert in a function body counts as run)."""
        executed = set(self.facts.get("executed") or ())
        if not executed:
            return []
        return [
            ast.unparse(a.test)
            for a in _module_level(ast.parse(self.current), ast.Assert)
            if not any(line in executed for line in range(a.lineno, (a.end_lineno or a.lineno) + 1))
        ]

    def first_interesting(self, candidates: Sequence[str]) -> int | None:
        """Index of the first interesting candidate, testing ``jobs`` at a time in order."""
        pending = self._admitted(candidates)
        for start in range(0, len(pending), self.jobs):
            batch = pending[start : start + self.jobs]
            self._count(batch)
            verdicts = self._asked(self.oracle.judge, [source for _, source in batch])
            for (index, source), verdict in zip(batch, verdicts, strict=False):
                if verdict is Verdict.LATER:  # given only after an interesting one, which was read first
                    verdict = self._asked(self.oracle.judge, [source])[0]
                if verdict is Verdict.INTERESTING:
                    return index
        return None

    def _asked(self, ask: Callable[[list[str]], object], sources: list[str]) -> tuple[Verdict, ...]:
        """The oracle's verdicts; a yes it takes back ends the pass's turn (`TakenBack`): the program changed."""
        answers = ask(sources)
        if answers.retracted:
            raise TakenBack(answers.retracted)
        return answers.verdicts

    def screen(self, candidates: Sequence[str]) -> list[int]:
        """Indices of the admissible candidates that fail the same way where the script fails, every one judged, all
        asked at once: every answer is needed, so the runs go `jobs` at a time with no wait for a batch's slowest
        (the oracle splits them where a time budget needs). An oracle that can (`Oracle.screen`) leaves their runs
        where the bug is fixed until `first_interesting` asks: a pass that takes several edits in one candidate pays
        one such run, not one each."""
        pending = self._admitted(candidates)
        if not pending:
            return []
        self._count(pending)
        verdicts = self._asked(self.oracle.screen, [source for _, source in pending])
        return [index for (index, _), v in zip(pending, verdicts, strict=False) if v is not Verdict.UNINTERESTING]

    def _admitted(self, candidates: Sequence[str]) -> list[tuple[int, str]]:
        """(index, normalized source) of the candidates the oracle is asked about: they parse, and are admissible."""
        return [(i, n) for i, c in enumerate(candidates) if (n := _normalized(c)) is not None and self.admissible(n)]

    def judgeable(self, candidate: str) -> bool:
        """Whether `first_interesting` or `screen` would send `candidate` to the oracle, as the program stands."""
        return bool(self._admitted([candidate]))

    def remembers(self) -> bool:
        """Whether any pass still holds edits it refused (`refused_by`)."""
        return any(self._refused.values())

    def refused_by(self, reduction: object) -> set:
        """The edits `reduction` (a pass) refused since the search last forgot: its own to read and add to."""
        return self._refused.setdefault(reduction, set())

    def forget(self) -> None:
        """Every pass judges every edit again from its next turn."""
        self._refused.clear()

    def _count(self, batch: list[tuple[int, str]]) -> None:
        fresh = {source for _, source in batch} - self._sent
        self.tried += len(fresh)
        self._sent |= fresh

    def shadow(self, limit: int = 64) -> Problem:
        """A copy that takes every admissible proposal untested, at most `limit` of them: what passes would make of
        the program if the oracle said yes to each (`passes.together`). It runs nothing, so it knows no facts."""
        twin = copy.copy(self)
        twin.accepted, twin.jobs, twin.measure, twin._sent = set(self.accepted), 1, None, set(self._sent)
        twin._refused = {}
        twin.history = list(self.history)
        twin.oracle = PlainOracle(lambda sources: [True] * len(sources))
        taken = [0]

        def count(_source: str) -> None:
            taken[0] += 1
            if taken[0] >= limit:
                raise ShadowFull

        twin.on_accept = count
        return twin

    def accept(self, source: str) -> None:
        self.current = normalize(source)
        self.accepted.add(self.current)
        self.history.append(self.current)
        self._take(self.current)

    def retract(self, source: str) -> bool:
        """Go back to the program before `source` was accepted (a `Retraction`), dropping what was accepted after it;
        False where `source` was never accepted (a ddmin pass asked and had not taken it yet). It stays among the
        accepted programs: never proposed again."""
        if source not in self.history[1:]:
            return False
        del self.history[self.history.index(source, 1) :]
        self.current = self.history[-1]
        self._take(self.current)
        return True

    def _take(self, source: str) -> None:
        self.lines = code_lines(source)
        self.unbound = unbound_names(source)
        self.checks = assert_conditions(source)
        self.on_accept(source)


class TakenBack(Exception):
    """The oracle took back yeses (`Retraction`) while a pass was asking: the pass's turn ends where it was (the
    search's own control flow; an oracle never raises it)."""

    def __init__(self, retracted: tuple[Retraction, ...]):
        super().__init__(f"{len(retracted)} yes(es) taken back")
        self.retracted = retracted


class ShadowFull(Exception):
    """A shadow problem took its limit of proposals (passes that keep proposing under an oracle that says yes)."""


Facts = Callable[[str], dict]  # current program -> what a run of it showed (the driver runs it; the search never does)


@dataclass
class PassRecord:
    """What one pass did over a reduction: its share of the time, the candidates it sent, the lines it removed."""

    name: str
    turns: int = 0
    seconds: float = 0.0
    candidates: int = 0
    lines_removed: int = 0


def _ignore(_: str) -> None:
    pass


@dataclass(frozen=True)
class Observers:
    """What the search tells its caller and asks of it: each program accepted, each pass begun, what a run of the
    current program showed (`facts`, for the fact-driven passes), and what each pass cost (`records`, by pass name,
    filled in)."""

    on_accept: Callable[[str], None] = _ignore
    on_pass: Callable[[str], None] = _ignore
    facts: Facts | None = None
    records: dict[str, PassRecord] | None = None


def reduce_source(  # noqa: PLR0913 (the search's one entry point: program, oracle, two pass lists, settings, observers)
    source: str,
    oracle: Oracle | TestMany,
    passes: Sequence[Callable[[Problem], None]],
    final_passes: Sequence[Callable[[Problem], None]],
    settings: SearchSettings = SearchSettings(),  # frozen: one shared default is safe
    observers: Observers = Observers(),  # likewise
) -> str:
    """Apply the passes in order, then the final passes, until a whole round changes nothing. Before each round the
    observers' `facts` (if given) say what a run of the current program showed; fact-driven passes use it.

    A pass that changed nothing on its last turn yields its turns to those that did: it runs again only once a round
    of the productive passes changes nothing (then every pass gets a turn, and a round where none changes anything
    ends the search). A pass that sent candidates and changed nothing on FRUITLESS_TURNS turns in a row is retired;
    before the search ends, every retired pass gets one more turn (Shrink Ray's probation), and where one changes
    something the search goes on. An edit a pass refused is not judged again in its later turns until a round changes
    nothing (`Problem.refused_by`); then they are forgotten and, where a pass left one unjudged, every pass runs again:
    the result is a fixpoint of every pass. `records` (by pass name) collects what each pass cost and removed. A yes
    the oracle takes back (`Retraction`, with an answer or at `Oracle.settle`, asked at the end of each round) takes
    back that program and what was built on it, and the search goes on."""
    problem = Problem(normalize(source), oracle, settings, observers.on_accept)
    everything = [*passes, *final_passes]
    facts, on_pass = observers.facts, observers.on_pass
    records = observers.records if observers.records is not None else {}
    idle: set[int] = set()  # passes whose last turn changed nothing
    fruitless: dict[int, int] = {}  # turns in a row that sent candidates and changed nothing
    probation = False  # the retired passes had their last turn since the program last changed
    for _ in range(MAX_ROUNDS):
        before, retracted = problem.current, False
        # a skip in a round that began with nothing remembered is of an edit refused this round, on this program (a
        # pass registered twice): no reason to run every pass again
        problem.skipped, remembered = 0, problem.remembers()
        every_pass = not idle
        problem.measure = facts
        for index, reduction in enumerate(everything):
            if (index in idle and not every_pass) or fruitless.get(index, 0) >= FRUITLESS_TURNS:
                continue
            name = reduction.__name__
            on_pass(name)
            record = records.setdefault(name, PassRecord(name))
            current, lines, tried, began = problem.current, problem.lines, problem.tried, time.monotonic()
            cut = False
            try:
                reduction(problem)
            except TakenBack as taken:  # the pass stops where it was: the round is not a fixpoint
                cut = _take_back(problem, taken.retracted)
                retracted |= cut
            record.turns += 1
            record.seconds += time.monotonic() - began
            record.candidates += problem.tried - tried
            record.lines_removed += lines - problem.lines
            changed = problem.current != current or cut  # a turn cut short was not spent: it comes again
            (idle.discard if changed else idle.add)(index)
            fruitless[index] = 0 if changed else fruitless.get(index, 0) + (problem.tried > tried)
        retracted |= _take_back(problem, problem.oracle.settle())
        if problem.current != before or retracted:
            probation = False
            continue
        # the round that ends the search judges every edit, those refused in earlier turns too
        problem.forget()
        if problem.skipped and remembered:
            idle.clear()
            continue
        retired = [i for i, turns in fruitless.items() if turns >= FRUITLESS_TURNS]
        if every_pass and retired and not probation:
            # a pass retired early (a decorator a later slice frees) gets one last turn before the end: the result
            # is a fixpoint of every pass, not of those still running
            probation = True
            fruitless.update({i: FRUITLESS_TURNS - 1 for i in retired})
        elif every_pass:
            break
        idle.clear()  # the productive passes are spent: every pass gets a turn
    while _take_back(problem, problem.oracle.settle()):  # MAX_ROUNDS spent with a yes still unsettled
        pass
    return problem.current


def _take_back(problem: Problem, retracted: Sequence[Retraction]) -> bool:
    """Go back before each yes taken back (one never accepted changes nothing: a ddmin pass had asked and not taken
    it yet); True if the oracle took any back."""
    for retraction in retracted:
        problem.retract(retraction.source)
    return bool(retracted)
