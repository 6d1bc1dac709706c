"""Fix prototypes in `patches/<library>/<name>.diff`, and applying them to minrepro-created environments.

A diff is a unified diff against the upstream repository layout (`src/accelerate/...`, `src/peft/...`,
`bitsandbytes/...`) preceded by a header in the style of `git format-patch`:

    Subject: [PATCH] what it fixes
    Case: the catalog case it is for
    Made-against: dist==version
    Applies-to: dist==version, ...

A port of a diff to an older release is named `<name>@<version>.diff`; together they form one logical patch
(`<library>/<name>`), and the variant whose `Applies-to` lists the installed version is the one applied.
Application is GNU patch with no fuzz, checked with a dry run first, so a patch lands whole or not at all.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from minrepro.dirs import bytecode_mirrors
from minrepro.envs.venvs import require_tool_env, site_packages, write_marker
from minrepro.errors import MinreproError

# the diffs are package data of minrepro.patches: the top-level patches/ in a checkout, installed in a wheel
PATCHES_DIR = Path(str(importlib.resources.files("minrepro.patches"))).resolve()  # the folder, not the checkout's link
_HEADER = re.compile(r"^([A-Z][\w-]*): (.*)$")
_HUNK = re.compile(
    r"Hunk #(\d+) (succeeded|FAILED|ignored) at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?"
)


@dataclass(frozen=True)
class Patch:
    path: Path
    library: str
    name: str
    subject: str
    case: str
    made_against: str
    applies_to: tuple[str, ...]

    @property
    def id(self) -> str:
        """The logical patch: every port of one fix shares it."""
        return patch_id(self.rel)

    @property
    def rel(self) -> str:
        """`library/file.diff`, as results and env markers record it."""
        return f"{self.library}/{self.path.name}"

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(
            _site_path(line[4:].strip()) for line in self.path.read_text().splitlines() if line.startswith("+++ ")
        )

    def applies(self, versions: dict[str, str | None]) -> bool:
        return any(versions.get(req.name.lower()) in req.specifier for req in map(Requirement, self.applies_to))


def patch_id(rel: str) -> str:
    """`peft/name@0.19.1.diff` (as env markers record it) -> `peft/name`, the id every port of the fix shares."""
    library, _, file = rel.partition("/")
    return f"{library}/{file.removesuffix('.diff').partition('@')[0]}"


@dataclass(frozen=True)
class HunkReport:
    patch: str
    file: str
    hunk: int
    status: str  # "applied" | "applied with offset" | "FAILED" | "already applied"
    line: int | None
    offset: int = 0


def _site_path(upstream: str) -> str:
    """`b/src/peft/x.py` -> `peft/x.py`; `b/bitsandbytes/x.py` -> `bitsandbytes/x.py`."""
    path = upstream.split("/", 1)[1]
    return path[4:] if path.startswith("src/") else path


def _strip_level(patch: Patch) -> int:
    first = next(line[4:].strip() for line in patch.path.read_text().splitlines() if line.startswith("+++ "))
    return 2 if first.split("/", 2)[1] == "src" else 1


def load_patch(path: Path) -> Patch:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _HEADER.match(line)
        if not match:
            break
        fields[match[1]] = match[2]
    missing = [k for k in ("Subject", "Case", "Made-against", "Applies-to") if k not in fields]
    if missing:
        raise MinreproError(f"{path}: header lacks {', '.join(missing)}")
    return Patch(
        path,
        path.parent.name,
        path.stem,
        fields["Subject"].removeprefix("[PATCH] "),
        fields["Case"],
        fields["Made-against"],
        tuple(s.strip() for s in fields["Applies-to"].split(",")),
    )


def load_patches(root: Path = PATCHES_DIR) -> list[Patch]:
    found = [load_patch(p) for p in sorted(Path(root).glob("*/*.diff"))]
    if not found:  # an install without its package data must not look like "no patches needed"
        raise MinreproError(f"no patches found in {root}")
    return found


def select(patch_ids: list[str], versions: dict[str, str | None], root: Path = PATCHES_DIR) -> list[Patch]:
    """For each logical patch id, the variant that applies to the installed versions (ids with none are
    left out: the fix is either upstream already or not ported to that release)."""
    by_id: dict[str, list[Patch]] = {}
    for patch in load_patches(root):
        by_id.setdefault(patch.id, []).append(patch)
    unknown = [pid for pid in patch_ids if pid not in by_id]
    if unknown:
        raise MinreproError(f"unknown patch id: {', '.join(unknown)} (known: {', '.join(sorted(by_id))})")
    chosen = []
    for pid in patch_ids:
        chosen += [p for p in by_id[pid] if p.applies(versions)][:1]
    return chosen


def needed(catalog, case, set_name: str) -> list[str]:
    """The case's patch ids that a version set needs: a patch of another family in its list (R's backport in V's,
    which R's KeyError hides on peft 0.19.1) is not needed where that family's own case passes (fixed upstream)."""
    owners = _owners(PATCHES_DIR)
    cases = {c.id: c for c in catalog.cases}

    def fixed_there(pid: str) -> bool:
        owner = owners.get(pid)
        return owner != case.id and owner in cases and cases[owner].declared(set_name) == "pass"

    return [pid for pid in case.patches if not fixed_there(pid)]


@functools.cache
def _owners(root: Path) -> dict[str, str]:
    """{patch id: the case its header names}, read once (explore asks for every case of a catalog)."""
    return {p.id: p.case for p in load_patches(root)}


def _gnu_patch() -> str:
    exe = shutil.which("patch")
    if exe is None:
        raise MinreproError("GNU patch is not installed (apt install patch); it applies the diffs")
    return exe


def _run_patch(patch: Patch, site: Path, *, dry_run: bool, reverse: bool = False) -> list[HunkReport]:
    cmd = [
        _gnu_patch(),
        f"-p{_strip_level(patch)}",
        "-d",
        str(site),
        "--batch",
        "--forward",
        "--fuzz=0",
        "--verbose",
        "--no-backup-if-mismatch",
        "--reject-file=-",
        "-i",
        str(patch.path),
    ]
    cmd += ["--dry-run"] * dry_run + ["--reverse"] * reverse
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    reports, current, skipping = [], "", False
    for line in proc.stdout.splitlines():
        if line.startswith(("checking file ", "patching file ")):
            current, skipping = line.split(" file ", 1)[1], False
        elif line.startswith("can't find file to patch"):
            current = "(file not found)"
        elif "previously applied" in line:
            reports.append(HunkReport(patch.id, current, 0, "already applied", None))
            skipping = True  # its hunks are then reported "ignored"
        elif (match := _HUNK.search(line)) and not skipping:
            offset = int(match[5] or 0)
            # "ignored": GNU patch found no file to patch (batch mode skips it)
            status = ("applied with offset" if offset else "applied") if match[2] == "succeeded" else "FAILED"
            reports.append(HunkReport(patch.id, current, int(match[1]), status, int(match[3]), offset))
    if proc.returncode not in (0, 1) and not reports:
        raise MinreproError(f"patch failed on {patch.path.name}: {(proc.stderr or proc.stdout).strip()[-200:]}")
    return reports


def check_patch(patch: Patch, site: Path) -> list[HunkReport]:
    """A dry run: how each hunk would apply to the files under `site`."""
    return _run_patch(patch, site, dry_run=True)


def apply_patches(patches: list[Patch], env: Path) -> list[HunkReport]:
    """Apply each patch whole (dry run first) to a minrepro-created env, recording each in the env's marker as
    it lands: if a later one does not apply, the marker still says exactly what the env holds."""
    marker = require_tool_env(env)
    site = site_packages(env)
    reports: list[HunkReport] = []
    for patch in patches:
        dry = check_patch(patch, site)
        reports += dry
        if any(r.status == "already applied" for r in dry):
            continue
        if not _lands(dry):
            raise MinreproError(
                f"{patch.path.name} does not apply cleanly to {site}: "
                + "; ".join(f"{r.file} hunk {r.hunk} {r.status}" for r in dry if r.status == "FAILED")
                + f" (applied before it: {', '.join(marker['patches']) or 'none'})"
            )
        copy = applied_copy(env, patch.rel)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(patch.path, copy)
        _run_patch(patch, site, dry_run=False)
        _drop_bytecode(site, patch.files)
        marker["patches"].append(patch.rel)
        write_marker(env, marker)
    return reports


def revert_patches(env: Path) -> list[str]:
    """Undo every patch the env's marker lists, newest first; the names reverted."""
    marker = require_tool_env(env)
    site, reverted = site_packages(env), []
    for rel in reversed(marker.get("patches", [])):
        copy = applied_copy(env, rel)
        patch = load_patch(copy if copy.exists() else PATCHES_DIR / rel)
        if not _lands(_run_patch(patch, site, dry_run=True, reverse=True)):  # whole or not at all, as applying
            raise MinreproError(
                f"{rel} does not revert cleanly in {env} (its files were changed since it was "
                "applied); remove that environment to rebuild it"
            )
        _run_patch(patch, site, dry_run=False, reverse=True)
        _drop_bytecode(site, patch.files)
        copy.unlink(missing_ok=True)  # what is left under minrepro-applied/ is what is applied
        reverted.append(rel)
    marker["patches"] = []
    write_marker(env, marker)
    return reverted


def _lands(dry: list[HunkReport]) -> bool:
    """Whether a dry run says the whole diff would go in (GNU patch reports no hunk when it finds no file)."""
    return bool(dry) and not any(r.status == "FAILED" for r in dry)


def applied_copy(env: Path, rel: str) -> Path:
    """The diff as it was applied to `env`: a revert needs the text that went in, not the file as edited since."""
    return env / "minrepro-applied" / rel


def applied_as_today(env: Path, patches: list[Patch]) -> bool:
    """Whether every patch went into `env` with the text its file has now (an edited diff makes the env stale)."""
    copies = [(applied_copy(env, p.rel), p.path) for p in patches]
    return all(copy.is_file() and copy.read_bytes() == path.read_bytes() for copy, path in copies)


def _drop_bytecode(site: Path, files: tuple[str, ...]) -> None:
    # a patched file of the same size in the same second would otherwise keep its stale .pyc, beside it or in the
    # bytecode cache runs keep where the environment turns bytecode off
    for rel in files:
        source = site / rel
        kept = [mirror.parent for mirror in bytecode_mirrors(source)]
        for folder in [source.parent / "__pycache__", *kept]:
            for pyc in folder.glob(f"{source.stem}.*.pyc"):
                pyc.unlink(missing_ok=True)
