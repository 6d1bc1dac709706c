"""Bisecting a case over a package's releases, each in its own minrepro-created venv.

The other packages stay at the case's pins (the first version set on which it fails). A version is
"bad" when the case fails with its catalog signature, "good" when it passes, and "skip" when it cannot be
installed or fails some other way (an import error from a release that predates the model, say); a skip
is stepped over as `git bisect skip` does. Outcomes are cached per requirement set, so a rerun or a
joint search reuses every environment already judged.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from collections.abc import Callable

from packaging.version import InvalidVersion, Version

from minrepro.catalog.manifest import LIBRARIES, Case, script_pins
from minrepro.envs.refs import RepoRef, commits_between, overlay_env, pr_number
from minrepro.envs.venvs import EnvCreationError, create_env, env_python
from minrepro.errors import MinreproError
from minrepro.catalog.run import observe
from minrepro.harness.runner import RunResult, run_script
from minrepro.harness.signature import Signature

Outcome = str  # "bad" | "good" | "skip"


def releases(package: str, pre: bool = False, wheelhouse: Path | None = None) -> list[Version]:
    """Every release the package index (pip's configured one) lists, oldest first."""
    index = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--pre", *index, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
    )
    match = re.search(r"Available versions: (.*)", proc.stdout)
    if proc.returncode != 0 or not match:
        raise MinreproError(
            f"cannot list releases of {package}: {(proc.stderr.strip() or 'no versions').splitlines()[-1]}"
        )
    versions = []
    for text in match[1].split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return sorted(v for v in versions if pre or not v.is_prerelease)


@dataclass
class Judge:
    """Installs a requirement set in a cached venv and runs the case there."""

    case: Case
    base: dict[str, str]  # {dist: version}: the pins the other packages keep
    libraries: frozenset[str]  # the HF libraries among the pins; the others only support the base set
    envs: Path
    cache_file: Path
    timeout: float
    wheelhouse: Path | None = None
    log: Callable[[str], None] = lambda _: None

    def __post_init__(self) -> None:
        self.cache: dict[str, dict[str, str]] = (
            json.loads(self.cache_file.read_text()) if self.cache_file.is_file() else {}
        )

    def requirements(self, overrides: dict[str, Version]) -> list[str]:
        pins = {**self.base, **{k: str(v) for k, v in overrides.items()}}
        if pins != self.base:
            # support pins (tokenizers for transformers 5.6.2) only hold the base versions together;
            # other releases pick their own
            pins = {k: v for k, v in pins.items() if k in self.libraries or k in overrides}
        return [f"{dist}=={version}" for dist, version in sorted(pins.items())]

    def __call__(self, overrides: dict[str, Version]) -> Outcome:
        reqs = self.requirements(overrides)
        key = " ".join(reqs)
        # what the run did is cached, not the verdict: a verdict is derived from it and the case's current
        # expectation, so a changed signature regex re-judges without re-running the release
        if "signature" not in self.cache.get(key, {}):
            self.cache[key] = self._observe(reqs)
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            self.cache_file.write_text(json.dumps(self.cache, indent=1))
        seen = self.cache[key]
        outcome = "skip" if seen.get("install_error") else self._verdict(seen)
        self.log(f"{key}: {outcome} {seen['headline'][:80]}")
        return outcome

    def _observe(self, reqs: list[str]) -> dict:
        env = self.envs / hashlib.sha1(" ".join(reqs).encode()).hexdigest()[:12]
        try:
            python = create_env(env, reqs, self.wheelhouse, label=f"bisect {self.case.id}")
        except EnvCreationError:
            raise  # the machine's problem, not the release's: nothing is cached
        except MinreproError as exc:  # a release that will not install is a skip, not a crash
            return {"headline": str(exc), "signature": None, "install_error": True}
        return _seen(
            run_script(self.case.script, python=str(python), timeout=self.timeout, isolated=not self.case.user_script)
        )

    def _verdict(self, seen: dict) -> Outcome:
        return verdict(self.case, seen)


def verdict(case: Case, seen: dict) -> Outcome:
    """bad: the case's own failure; good: a pass; skip: anything else (an import error, another failure)."""
    signature = Signature.from_dict(seen["signature"]) if seen["signature"] else None
    observed, _ = observe(case, RunResult(1 if signature else 0, "", "", 0.0, signature, seen["raw_headline"]))
    return {"fail": "bad", "pass": "good"}.get(observed, "skip")


def _seen(run: RunResult) -> dict:
    return {
        "headline": run.raw_headline.split("\n", 1)[0],
        "raw_headline": run.raw_headline,
        "signature": run.signature.to_dict() if run.signature else None,
    }


@dataclass(frozen=True)
class ReleaseRuns:
    """How a judge installs and runs each release: the run's timeout, the wheelhouse it installs from (None: the
    index), and where progress goes."""

    timeout: float
    wheelhouse: Path | None = None
    log: Callable[[str], None] = lambda _: None


def judge_for(
    case: Case, packages: list[str], envs: Path, runs: ReleaseRuns, pins: dict[str, str] | None = None
) -> Judge:
    """A judge that keeps the other packages at the case script's PEP 723 pins, or at `pins` where given (a fix that
    needs another library's newer release to pass: transformers' whole-disk dispatch meets accelerate 1.13's
    refusal, so family Y bisects with accelerate at 1.15)."""
    base = script_pins(case.script.read_text(encoding="utf-8"))
    missing = [p for p in packages if p not in base]
    if missing:
        raise MinreproError(
            f"{case.id}'s script does not depend on {', '.join(missing)} (its pins: "
            f"{', '.join(f'{k}=={v}' for k, v in base.items())})"
        )
    unknown = [p for p in pins or {} if p not in base or p in packages]
    if unknown:
        raise MinreproError(
            f"--pin {', '.join(unknown)}: pin only another package the script depends on "
            f"({', '.join(p for p in base if p not in packages)})"
        )
    base = {**base, **(pins or {})}
    libraries = frozenset(d for d in base if d in LIBRARIES)  # tokenizers & co. only support a base pin
    cache_file = envs.parent / "bisect" / f"{case.id}.json"
    return Judge(case, base, libraries, envs / "bisect", cache_file, runs.timeout, runs.wheelhouse, runs.log)


def first_flip(versions: list[Version], judge: Callable[[Version], Outcome], start: Outcome) -> Version | None:
    """The first version whose outcome differs from `start`, assuming one flip between the ends; skips are
    stepped over. `versions[0]` must judge `start`, and the last version the other outcome."""
    lo, hi = 0, len(versions) - 1  # judge(lo) == start, judge(hi) == flipped
    pending = list(range(lo + 1, hi))
    while hi - lo > 1:
        middle = [i for i in pending if lo < i < hi]
        if not middle:
            break
        i = min(middle, key=lambda j: abs(j - (lo + hi) / 2))
        outcome = judge(versions[i])
        pending.remove(i)
        if outcome == "skip":
            continue
        if outcome == start:
            lo = i
        else:
            hi = i
    return versions[hi]


@dataclass
class BisectResult:
    package: str
    bad: str
    good: str | None
    first_fixed: str | None  # the first release judged good after the last one judged bad
    last_bad: str | None
    judged: dict[str, str]
    # releases between last_bad and first_fixed that could not be judged (skips): when there are any, the fix is
    # somewhere in (last_bad, first_fixed], not necessarily at first_fixed
    undecided: list[str] = field(default_factory=list)

    def fixed_range(self) -> str:
        """Where the fix lies, as a maintainer reads it."""
        if not self.undecided:
            return f"first fixed in {self.first_fixed}"
        return (
            f"fixed after {self.last_bad}, by {self.first_fixed} at the latest ({len(self.undecided)} release(s) "
            f"between could not be judged: {', '.join(self.undecided)})"
        )


def bisect_package(
    judge: Judge, package: str, versions: list[Version], bad: Version, good: Version | None
) -> BisectResult:
    """First release of `package` (after `bad`) on which the case passes; `good` defaults to the newest."""
    judged: dict[str, str] = {}

    def at(v: Version) -> Outcome:
        judged[str(v)] = judge({package: v})
        return judged[str(v)]

    good = good or versions[-1]
    if at(bad) != "bad":
        raise MinreproError(
            f"{judge.case.id} does not fail with {package}=={bad} ({judged[str(bad)]}); choose another --bad"
        )
    if at(good) == "skip":
        headline = judge.cache[" ".join(judge.requirements({package: good}))]["headline"][:160]
        raise MinreproError(f"cannot judge {package}=={good}: {headline}")
    if at(good) != "good":
        return BisectResult(package, str(bad), str(good), None, str(good), judged)
    span = [v for v in versions if bad <= v <= good]
    fixed = first_flip(span, at, "bad")
    previous = [v for v in span if v < fixed and judged.get(str(v)) == "bad"]
    undecided = [str(v) for v in span if previous and previous[-1] < v < fixed]
    return BisectResult(
        package, str(bad), str(good), str(fixed), str(previous[-1]) if previous else None, judged, undecided
    )


def minimal_upgrades(judge: Judge, packages: list[str], targets: dict[str, Version]) -> list[tuple[str, ...]]:
    """The minimal sets of packages whose upgrade (to `targets`) flips the case from failing to passing."""
    minimal: list[tuple[str, ...]] = []
    for size in range(1, len(packages) + 1):
        for subset in combinations(packages, size):
            if any(set(m) <= set(subset) for m in minimal):
                continue
            if judge({p: targets[p] for p in subset}) == "good":
                minimal.append(subset)
    return minimal


@dataclass
class CommitJudge:
    """Runs a case with `repo`'s package at each commit laid over one env (the case's pins, the library at the
    release the range starts from); what each commit did is cached by its hash."""

    case: Case
    repo: RepoRef
    env: Path
    cache_file: Path
    timeout: float
    log: Callable[[str], None] = lambda _: None

    def __post_init__(self) -> None:
        self.cache: dict[str, dict] = json.loads(self.cache_file.read_text()) if self.cache_file.is_file() else {}

    def __call__(self, commit: str) -> Outcome:
        if "signature" not in self.cache.get(commit, {}):
            self.cache[commit] = self._observe(commit)
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            self.cache_file.write_text(json.dumps(self.cache, indent=1))
        seen = self.cache[commit]
        outcome = "skip" if seen.get("install_error") else verdict(self.case, seen)
        self.log(f"{commit[:10]} {seen.get('subject', '')[:60]}: {outcome} {seen['headline'][:70]}")
        return outcome

    def _observe(self, commit: str) -> dict:
        try:
            (record,) = overlay_env(self.env, [self.repo], {self.repo.library: commit})
        except MinreproError as exc:  # a commit without the package (a reorganised tree) is a skip
            return {"headline": str(exc), "signature": None, "install_error": True}
        run = run_script(
            self.case.script, python=str(env_python(self.env)), timeout=self.timeout, isolated=not self.case.user_script
        )
        return {**_seen(run), "subject": record["subject"]}


@dataclass
class CommitBisect:
    library: str
    older: str
    newer: str
    direction: str  # "fixed" (fails at older, passes at newer) or "broke"
    commit: str | None  # the first commit with newer's outcome
    subject: str = ""
    pr: int | None = None
    last_before: str | None = None  # the last commit judged with older's outcome
    undecided: list[str] = field(default_factory=list)  # skipped commits between the two: the change is among them
    judged: dict[str, str] = field(default_factory=dict)
    commits: int = 0  # commits in the range

    @classmethod
    def from_record(cls, document: dict) -> CommitBisect:
        """Back from what `minrepro bisect --git` writes (these fields, with the case, base and subjects beside)."""
        return cls(**{name: document[name] for name in cls.__dataclass_fields__ if name in document})

    def sentence(self) -> str:
        where = f'{self.commit[:12]} "{self.subject}"' + (f" (PR #{self.pr})" if self.pr else "")
        span = (
            f"; {len(self.undecided)} commit(s) before it could not be judged, the change may be among them"
            if self.undecided
            else ""
        )
        return f"first {self.direction} at {where}, {len(self.judged)} of {self.commits} commits judged{span}"


def bisect_commits(judge: CommitJudge, older: str, newer: str) -> CommitBisect:
    """The first commit between two refs whose outcome is newer's (a fix or a break), skips stepped over."""
    commits = commits_between(judge.repo, older, newer)
    judged: dict[str, str] = {}

    def at(commit: str) -> Outcome:
        judged[commit] = judge(commit)
        return judged[commit]

    start, end = at(commits[0]), at(commits[-1])
    if "skip" in (start, end) or start == end:
        raise MinreproError(
            f"{judge.case.id}: {judge.repo.library} at {older} is {start} and at {newer} {end}: "
            "bisection needs a failing and a passing end"
        )
    flipped = first_flip(commits, at, start)
    before = [c for c in commits[: commits.index(flipped)] if judged.get(c) == start]
    undecided = [c for c in commits if before and commits.index(before[-1]) < commits.index(c) < commits.index(flipped)]
    subject = judge.repo.subject(flipped)
    return CommitBisect(
        judge.repo.library,
        older,
        newer,
        "fixed" if start == "bad" else "broke",
        flipped,
        subject,
        pr_number(subject),
        before[-1] if before else None,
        undecided,
        judged,
        len(commits),
    )


def release_tag(repo: RepoRef, version: str) -> str:
    """The tag of a release in its repository (`v1.14.0` for accelerate, peft, transformers; `0.50.0` too)."""
    for tag in (f"v{version}", version):
        try:
            repo.commit(tag)
            return tag
        except MinreproError:
            continue
    raise MinreproError(f"no tag for {repo.library} {version} in {repo.gitdir}")
