"""The `latest` version set: the snapshot's libraries at the newest final release the package index serves when it is
resolved, not a table of `sets.toml`. Its pins move with the index, so whatever runs on it records them (and where and
when they were resolved) beside its results; the named snapshot (`newest`) stays what the manifest declares outcomes
for, and `minrepro drift` compares the two.

Releases are listed by pip (`pip index versions`, with pip's own index configuration). pip answers from whatever
indexes it reaches and skips one it cannot fetch without a warning, which would make an older local mirror look like
the newest releases: a listing in which pip could not fetch a remote index page is refused instead, in one line.
"""

from __future__ import annotations

import datetime as _dt
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from ..errors import MinreproError
from .sets import VersionSet

LATEST = "latest"  # the set's name, where a version set is named (`--set latest`, results/drift/latest-cpu.json)
SNAPSHOT = "newest"  # the named set whose libraries `latest` moves forward, and whose outcomes it is compared with
INDEX = "the package index"  # where the releases came from, as a record says it (or "the wheelhouse NAME")


class IndexUnreachable(MinreproError):
    """pip could not reach the index it is configured with: the newest releases cannot be known here."""


# pip -vv says so for every page it could not get ("Could not fetch URL URL: REASON - skipping"); a 404 is a
# project the index does not have, not an index out of reach
_NOT_FETCHED = re.compile(r"^Could not fetch URL (\S+?):? (.*?)(?: - skipping)?$", re.M)
_AVAILABLE = re.compile(r"^Available versions: (.*)$", re.M)


def index_releases(package: str, wheelhouse: Path | None = None) -> list[Version]:
    """Every release of `package` pip lists (pre-releases included; oldest first), from pip's configured index, or
    from `wheelhouse` alone. A remote index pip could not fetch is an `IndexUnreachable`, never a shorter list."""
    index = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--pre", "-vv", "--retries", "1", *index],
        capture_output=True,
        text=True,
    )
    return parse_listing(package, proc.returncode, proc.stdout, proc.stderr)


def parse_listing(package: str, returncode: int, stdout: str, stderr: str) -> list[Version]:
    """What `pip index versions PACKAGE -vv` printed, as releases (see `index_releases`)."""
    unreachable = [
        (url, reason)
        for url, reason in _NOT_FETCHED.findall(stdout + "\n" + stderr)
        if url.startswith(("http://", "https://")) and " 404 " not in f" {reason} "
    ]
    if unreachable:
        url, reason = unreachable[0]
        host = url.split("/")[2]
        raise IndexUnreachable(
            f"the latest set needs the package index to name the newest releases, and pip could not reach {host} "
            f"({_short(reason)}): run it where the index answers, or give a wheelhouse (--wheelhouse DIR, "
            f"MINREPRO_WHEELHOUSE), or use the snapshot (--set {SNAPSHOT})"
        )
    match = _AVAILABLE.search(stdout)
    if returncode != 0 or not match:
        last = [line for line in stderr.strip().splitlines() if not line.startswith(("WARNING:", "  "))]
        raise MinreproError(f"cannot list releases of {package}: {(last or ['no versions found'])[-1][:200]}")
    versions = []
    for text in match[1].split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return sorted(versions)


def _short(reason: str) -> str:
    """pip's reason, without the urllib3 object reprs: `connection error: ... [Errno 111] Connection refused`."""
    errno = re.search(r"\[Errno -?\d+\] ([^'\")]+)", reason)
    kind = reason.split(":", 1)[0].strip()
    return f"{kind}: {errno[1].strip()}" if errno else reason[:120]


def newest_final(versions: list[Version]) -> Version | None:
    """The newest final release (no pre-, dev- or local-version releases; post releases count)."""
    finals = [v for v in versions if not v.is_prerelease and not v.local]
    return max(finals) if finals else None


@dataclass(frozen=True)
class Resolution:
    """Where and when `latest` was resolved, recorded with every result that ran on it."""

    pins: dict[str, str]  # {distribution: version}
    snapshot: dict[str, str]  # the snapshot's pins it moved forward
    date: str  # ISO date and time, UTC
    source: str  # INDEX, or "the wheelhouse NAME"

    def changed(self) -> dict[str, tuple[str, str]]:
        """{distribution: (snapshot's version, latest's)} for the libraries whose release moved."""
        return {d: (self.snapshot[d], v) for d, v in self.pins.items() if self.snapshot.get(d) != v}

    def describe(self) -> str:
        moved = self.changed()
        libs = ", ".join(f"{d} {v}" + (f" (newest {moved[d][0]})" if d in moved else "") for d, v in self.pins.items())
        return f"{libs}; the newest final releases {self.source} served on {self.date[:10]}"

    def to_dict(self) -> dict[str, object]:
        return {"pins": self.pins, "snapshot": self.snapshot, "date": self.date, "source": self.source}

    @classmethod
    def from_dict(cls, data: dict) -> Resolution:
        return cls(dict(data["pins"]), dict(data["snapshot"]), data["date"], data["source"])

    def version_set(self) -> VersionSet:
        requirements = tuple(Requirement(f"{d}=={v}") for d, v in self.pins.items())
        return VersionSet(LATEST, f"the newest releases {self.source} served on {self.date[:10]}", requirements)


def resolve_latest(
    snapshot: VersionSet,
    wheelhouse: Path | None = None,
    ask: Callable[[str, Path | None], list[Version]] = index_releases,
    now: _dt.datetime | None = None,
) -> Resolution:
    """Each library the snapshot pins, at the newest final release the index (or `wheelhouse`) serves now. `ask`
    lists a package's releases (the index, through pip; a test's stub). A library the index has no final release of
    keeps the snapshot's pin, and never goes back below it."""
    pins = {}
    for dist, pinned in snapshot.pins().items():
        newest = newest_final(ask(dist, wheelhouse))
        pins[dist] = str(newest) if newest is not None and newest > Version(pinned) else pinned
    when = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Resolution(pins, snapshot.pins(), when, f"the wheelhouse {wheelhouse.name}" if wheelhouse else INDEX)
