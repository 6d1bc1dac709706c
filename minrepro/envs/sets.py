"""Version sets (`sets.toml`): named, exact pins of the libraries under test, and how an installed
environment is matched to one."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import MinreproError

SETS_FILE = Path(__file__).with_name("sets.toml")


@dataclass(frozen=True)
class VersionSet:
    name: str
    description: str
    requirements: tuple[Requirement, ...]

    def pins(self) -> dict[str, str]:
        """{distribution: exact version} for the set's ``==`` requirements."""
        return {r.name.lower(): next(iter(r.specifier)).version for r in self.requirements}


def load_sets(path: Path | None = None) -> dict[str, VersionSet]:
    """The sets in file order; a defect is a one-line error naming the set."""
    path = Path(path) if path is not None else SETS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MinreproError(f"cannot read version sets {path}: {exc}") from None
    sets = {name: _version_set(name, raw) for name, raw in data.get("sets", {}).items()}
    for required in ("pinned", "newest"):
        if required not in sets:
            raise MinreproError(f"{path.name}: missing [sets.{required}]")
    return sets


def _version_set(name: str, raw: dict[str, Any]) -> VersionSet:
    try:
        reqs = tuple(Requirement(r) for r in raw["requirements"])
    except (KeyError, TypeError, InvalidRequirement) as exc:
        raise MinreproError(f"[sets.{name}]: bad or missing requirements ({exc})") from None
    for req in reqs:
        if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
            raise MinreproError(f"[sets.{name}]: {req} must pin one exact version with ==")
    return VersionSet(name, raw.get("description", ""), reqs)


def detect_set(sets: dict[str, VersionSet], installed: dict[str, str | None]) -> str | None:
    """The name of the version set the installed distributions match exactly, if any."""
    for name, vset in sets.items():
        if all(installed.get(dist) == version for dist, version in vset.pins().items()):
            return name
    return None
