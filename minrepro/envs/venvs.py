"""Isolated virtual environments that minrepro creates, and the marker that says so.

Patches are only ever applied to an environment carrying the marker: the user's own environment is never
a target. torch is not installed into these environments when the creating interpreter has one (it is
large, and on GPU boxes it is the image's CUDA build); a `.pth` file makes it importable instead, after the
environment's own site-packages, so the libraries installed here win. Where it has none (CPU machines), the
CPU build is installed once into a shared directory of the cache and every environment links it the same way:
a full torch per environment filled the CI machine's disk once a third version set was added.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from minrepro.dirs import bytecode_mirrors
from minrepro.errors import MinreproError

MARKER = "minrepro-env.json"


class EnvCreationError(MinreproError):
    """The machine could not make a venv at all (disk, permissions): not a property of any version."""


CPU_TORCH = "torch==2.13.0"  # what pip finds locally on the CPU machines (see NOTES)
SYSTEM_SITE_PTH = "_minrepro_system_site.pth"


def env_python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def env_of(python: str | Path) -> Path:
    """The environment an interpreter path belongs to (the inverse of `env_python`)."""
    return Path(python).absolute().parent.parent


def read_marker(env: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(env) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_marker(env: Path, data: dict[str, Any]) -> None:
    (Path(env) / MARKER).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def require_tool_env(env: Path) -> dict[str, Any]:
    """The marker of a minrepro-created venv, or a one-line error: nothing else may be patched."""
    env = Path(env)
    if not (env / "pyvenv.cfg").is_file():
        raise MinreproError(f"{env} is not a virtual environment (no pyvenv.cfg); refusing to patch it")
    marker = read_marker(env)
    if marker is None or marker.get("created_by") != "minrepro":
        raise MinreproError(
            f"{env} was not created by minrepro (no {MARKER}); refusing to patch it. "
            "Create one with `minrepro env create DIR --set SET`."
        )
    if Path(sys.prefix).resolve() == env.resolve():
        raise MinreproError(f"{env} is the environment running minrepro; refusing to patch it")
    return marker


def site_packages(env: Path) -> Path:
    out = subprocess.run(
        [str(env_python(env)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def torch_site() -> str | None:
    """The site-packages holding this interpreter's torch, if it has one. On some GPU images "the system
    python" is itself a venv (/opt/torch/.venv), whose packages `--system-site-packages` does not reach; a
    .pth file naming this directory does."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    return str(Path(spec.origin).parents[1]) if spec is not None and spec.origin else None


def shared_site(
    python: Path, requirement: str = CPU_TORCH, where: Path | None = None, pip_args: Sequence[str] = ()
) -> Path:
    """A directory holding `requirement` (and what it needs) for `python`'s version, installed once with
    `pip --target` and shared by every env through a `.pth`. Built under a temporary name and renamed, so a
    half-made one (disk full, interrupted) is never taken for a complete one."""
    from ..dirs import cache

    version = subprocess.run(
        [str(python), "-c", "import sys; print('py%d%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = Path(where or cache("shared")) / f"{requirement.replace('==', '-')}-{version}"
    if site.is_dir():
        return site
    site.parent.mkdir(parents=True, exist_ok=True)
    partial = site.with_name(f"{site.name}.partial-{os.getpid()}")
    try:
        _pip_with(python, ["--target", str(partial), *pip_args, requirement], None)
    except MinreproError as exc:  # a machine problem (disk, index), not a property of any version
        shutil.rmtree(partial, ignore_errors=True)
        raise EnvCreationError(str(exc)) from None
    try:
        partial.rename(site)
    except OSError:  # another process finished the same directory first
        shutil.rmtree(partial, ignore_errors=True)
    return site


def link_site(env: Path, site: str | Path) -> None:
    """Make `site` importable in `env`, after the env's own site-packages."""
    Path(site_packages(env), SYSTEM_SITE_PTH).write_text(f"{site}\n", encoding="utf-8")


def pip_install(env: Path, requirements: Sequence[str], wheelhouse: Path | None = None) -> None:
    """Install into a minrepro-created env (extra tools such as pytest; never into another env)."""
    require_tool_env(env)
    _pip(env, list(requirements), wheelhouse)


def _pip(env: Path, args: Sequence[str], wheelhouse: Path | None) -> None:
    _pip_with(env_python(env), args, wheelhouse)


def _pip_with(python: Path, args: Sequence[str], wheelhouse: Path | None) -> None:
    index = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    cmd = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *index, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MinreproError(f"pip install {' '.join(args)} failed under {python}: {_pip_failure(proc)}")


def _pip_failure(proc: subprocess.CompletedProcess[str]) -> str:
    """The line that says why: pip's last ERROR line, not an index WARNING that happens to come last; a pip that
    was killed says so."""
    if proc.returncode < 0:
        return f"pip was killed by signal {-proc.returncode}"
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or [line for line in lines if not line.startswith("WARNING:")] or lines or ["no output"])[-1]


def create_env(env: Path, requirements: Sequence[str], wheelhouse: Path | None = None, label: str = "") -> Path:
    """Create (or reuse, when its marker lists the same requirements and no patches) a venv; its python."""
    env = Path(env).absolute()
    marker = read_marker(env)
    if marker and marker.get("requirements") == list(requirements) and not marker.get("patches"):
        return env_python(env)
    if env.exists() and any(env.iterdir()) and marker is None:
        raise MinreproError(f"{env} exists and was not created by minrepro; choose another directory")
    try:
        venv.EnvBuilder(clear=True, with_pip=True).create(env)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise EnvCreationError(f"cannot create a venv at {env}: {exc}") from None
    # marked as ours before anything can fail: a failed install (no wheel for a pin) left a directory that every
    # retry then refused as "not created by minrepro"
    write_marker(env, {"created_by": "minrepro", "label": label, "requirements": [], "incomplete": True})
    torch_from = torch_site() or str(shared_site(env_python(env)))
    link_site(env, torch_from)
    # The set's own pins go into this env even when the torch site (visible through the .pth) has the same
    # versions: patches must land here, never there. Their dependencies may come from either.
    _pip(env, ["--ignore-installed", "--no-deps", *requirements], wheelhouse)
    _pip(env, list(requirements), wheelhouse)
    write_marker(
        env,
        {
            "created_by": "minrepro",
            "label": label,
            "requirements": list(requirements),
            "torch_from": torch_from,
            "patches": [],
            "created": _dt.datetime.now().isoformat(timespec="seconds"),
        },
    )
    return env_python(env)


def wheelhouse_from_env() -> Path | None:
    """MINREPRO_WHEELHOUSE: install from that directory only (an offline GPU box)."""
    where = os.environ.get("MINREPRO_WHEELHOUSE")
    return Path(where) if where else None


def set_env(catalog, name: str, patched: bool = False, note=lambda _: None) -> Path:
    """The python of the cached env of a version set (patched: with every catalog patch that applies, in stacking
    order), made on first use in ~/.cache/minrepro/envs/ and reused while its marker still matches."""
    from ..dirs import cache

    env = cache("envs", f"{name}-patched" if patched else name)
    # two reductions on one box may ask for the same env at once: one makes it, the other waits and reuses it
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.with_name(f".{env.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _set_env(catalog, name, patched, note, env)


def _set_env(catalog, name: str, patched: bool, note, env: Path) -> Path:
    from ..catalog.manifest import stacking_order
    from .patching import applied_as_today, apply_patches, select

    requirements = [str(r) for r in catalog.version_set(name).requirements]
    marker = read_marker(env) or {}
    wanted = [] if not patched else select(stacking_order(catalog), catalog.sets[name].pins())
    if (
        marker.get("requirements") == requirements
        and marker.get("patches") == [p.rel for p in wanted]
        and applied_as_today(env, wanted)
    ):
        return env_python(env)
    note(f"making the {name}{' patched' if patched else ''} environment in {env} (once)")
    if env.exists():
        shutil.rmtree(env)
    for mirror in bytecode_mirrors(env):  # what runs compiled from the env made before: its files are made anew
        shutil.rmtree(mirror, ignore_errors=True)
    create_env(env, requirements, wheelhouse_from_env(), label=f"{name}{' patched' if patched else ''}")
    if wanted:
        apply_patches(wanted, env)
    return env_python(env)
