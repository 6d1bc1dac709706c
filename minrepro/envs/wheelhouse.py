"""A local wheelhouse for offline GPU boxes: the version sets' wheels for a target platform.

torch and its CUDA runtime are never downloaded: the target's system torch is reused. bitsandbytes
wheels carry a library per CUDA version (about 60 MB); `slim_wheel` keeps only the CPU library and the
CUDA versions asked for, so the wheelhouse stays small enough to copy to an offline machine.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence

from minrepro.catalog.manifest import load_catalog
from minrepro.errors import MinreproError
from minrepro.envs.upstream import TEST_REQUIREMENTS

DEFAULT_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)
# The target's own torch stays in charge; never ship it or its CUDA runtime.
SYSTEM_PROVIDED = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$", re.IGNORECASE)


def _tooling() -> list[str]:
    """What the offline box needs to run minrepro itself: nox, and the project's own dependencies."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    own = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"] if pyproject.is_file() else []
    return ["nox", *own]


def _target_args(python_version: str, platforms: Sequence[str]) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for platform in platforms:
        args += ["--platform", platform]
    return args


def resolve(requirements: Sequence[str], target: list[str]) -> list[tuple[str, str]]:
    """The (name, version) closure pip would install for ``requirements`` on the target platform."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--report",
            str(report),
            "--target",
            str(Path(tmp) / "t"),
            *target,
            *requirements,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise MinreproError(f"cannot resolve {' '.join(requirements)}: {_last_line(proc.stderr)}")
        items = json.loads(report.read_text())["install"]
    return [(i["metadata"]["name"], i["metadata"]["version"]) for i in items]


def download(pins: Sequence[tuple[str, str]], dest: Path, target: list[str]) -> None:
    for name, version in pins:  # one at a time: two versions of one package cannot share a resolve
        requirement = f"{name}=={version}" if version else name  # unpinned: the newest
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(dest), *target, requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise MinreproError(f"cannot download {requirement}: {_last_line(proc.stderr)}")


def slim_wheel(wheel: Path, cuda_versions: Sequence[str]) -> Path:
    """Rewrite a bitsandbytes wheel in place keeping libbitsandbytes_cpu and the listed CUDA libraries."""
    keep = {"cpu"} | {f"cuda{v}" for v in cuda_versions}
    pattern = re.compile(r"libbitsandbytes_(\w+?)\.(so|dll|dylib)$")
    out = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        kept_records = []
        for info in src.infolist():
            match = pattern.search(info.filename)
            if (match and match.group(1) not in keep) or info.filename == record_name:
                continue
            data = src.read(info)
            dst.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            kept_records.append(f"{info.filename},sha256={digest},{len(data)}")
        dst.writestr(record_name, "\n".join([*kept_records, f"{record_name},,"]) + "\n")
    out.replace(wheel)
    return wheel


@dataclass(frozen=True)
class TargetMachine:
    """The machine the wheels are for: its Python version and wheel platform tags, the CUDA versions whose libraries
    the bitsandbytes wheels keep, and the packages it already has (not downloaded)."""

    python_version: str
    platforms: Sequence[str]
    cuda_versions: Sequence[str]
    provided: Sequence[str] = ()


def build(dest: Path, sets: Sequence[str], machine: TargetMachine, closure: bool, extra: Sequence[str]) -> list[Path]:
    catalog = load_catalog()
    target = _target_args(machine.python_version, machine.platforms)
    dest.mkdir(parents=True, exist_ok=True)
    pins: dict[tuple[str, str], None] = {}
    # Everything torch itself depends on arrives with the target's torch.
    provided = {n.lower() for n, _ in resolve(["torch"], target)} if closure else set()
    provided |= {n.lower() for n in machine.provided}
    for name in sets:
        requirements = [str(r) for r in catalog.sets[name].requirements] + list(extra)
        found = resolve(requirements, target) if closure else [_split(r) for r in requirements]
        pins.update(
            (pin, None) for pin in found if not SYSTEM_PROVIDED.match(pin[0]) and pin[0].lower() not in provided
        )
    pins.update((pin, None) for pin in resolve(_tooling(), target))
    download(list(pins), dest, target)
    for wheel in dest.glob("bitsandbytes-*.whl"):
        slim_wheel(wheel, machine.cuda_versions)
    return sorted(dest.glob("*.whl"))


def _test_requirements() -> list[str]:
    return sorted({r for reqs in TEST_REQUIREMENTS.values() for r in reqs})


def _split(requirement: str) -> tuple[str, str]:
    name, _, version = requirement.partition("==")
    return name.strip(), version.strip()


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if not ln.startswith("WARNING")]
    return lines[-1] if lines else "no output"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minrepro.wheelhouse", description=__doc__)
    parser.add_argument("--dest", default="wheelhouse", help="directory for the wheels")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        help="version set (default: every set, as `nox -s minrepro` runs them all)",
    )
    parser.add_argument("--python-version", default="3.12", help="the target interpreter's version")
    parser.add_argument("--platform", dest="platforms", action="append", help="wheel platform tags")
    parser.add_argument(
        "--cuda",
        dest="cuda_versions",
        action="append",
        default=None,
        help="CUDA library versions to keep in bitsandbytes wheels (default: 130)",
    )
    parser.add_argument(
        "--direct-only",
        action="store_true",
        help="only the sets' own requirements, for a target whose system site-packages "
        "already hold their dependencies (a CUDA image with transformers installed)",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        help="additional requirement to include (with --direct-only: NAME==VERSION, or NAME for the newest)",
    )
    parser.add_argument(
        "--provided",
        action="append",
        default=[],
        metavar="NAME",
        help="a package the target already has (not downloaded), e.g. scipy on a CUDA image",
    )
    parser.add_argument(
        "--upstream-tests",
        action="store_true",
        help="also what `minrepro upstream-tests` installs to run the libraries' own tests",
    )
    args = parser.parse_args(argv)
    try:
        wheels = build(
            Path(args.dest),
            args.sets or list(load_catalog().sets),
            TargetMachine(
                args.python_version, args.platforms or DEFAULT_PLATFORMS, args.cuda_versions or ["130"], args.provided
            ),
            not args.direct_only,
            args.extra + (_test_requirements() if args.upstream_tests else []),
        )
    except MinreproError as exc:
        print(f"minrepro: error: {exc}", file=sys.stderr)
        return 2
    total = sum(w.stat().st_size for w in wheels)
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:7.1f} MiB  {wheel.name}")
    print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
