"""nox sessions: the catalog on each version set (`minrepro`), the patches proved on each set (`patched`), the catalog
on the newest releases the index serves now against the newest snapshot (`drift`), the test suite (`tests`), the
linter (`lint`), and an offline wheelhouse for GPU boxes without network (`wheelhouse`).

Results go to .minrepro/results/ (untracked): a run never rewrites tracked files. `-- --record` writes them to
results/ instead and regenerates the pages generated from there (`minrepro docs`: docs/catalog.md, docs/families/,
docs/main.md), which is what a maintainer of this repo does.

Environment:
  MINREPRO_WHEELHOUSE=DIR  install the HF libraries from DIR only (pip --no-index), for offline GPU boxes.

Where the interpreter running nox already has torch (GPU images), the session venvs see the system
site-packages and reuse that torch (pip + virtualenv: uv ignores system site-packages). Elsewhere the CPU
build `torch==2.13.0` (which pip finds locally on the CPU machines) is installed once into minrepro's cache
and linked into every session venv and every venv minrepro makes: one copy, not one per set.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))
from minrepro.catalog.manifest import load_catalog  # noqa: E402  (the manifest is the single source of versions)
from minrepro.envs.venvs import env_python, link_site, shared_site, torch_site  # noqa: E402

nox.options.sessions = ["minrepro", "tests"]
nox.options.default_venv_backend = "virtualenv"

SETS = load_catalog().sets
SYSTEM_SITE = torch_site()  # where the interpreter running nox has torch (GPU images), or None
SYSTEM_TORCH = SYSTEM_SITE is not None
WHEELHOUSE = os.environ.get("MINREPRO_WHEELHOUSE")
VENV_PARAMS = ["--system-site-packages"] if SYSTEM_TORCH else []


def _install(session: nox.Session, *requirements: str) -> None:
    if WHEELHOUSE:
        if not Path(WHEELHOUSE).is_dir():
            session.error(f"MINREPRO_WHEELHOUSE={WHEELHOUSE} is not a directory")
        session.install("--no-index", "--find-links", WHEELHOUSE, *requirements)
    else:
        session.install(*requirements)


def _results_dir(session: nox.Session) -> tuple[Path, list[str]]:
    """(where results go, the remaining posargs): results/ with --record, else the untracked .minrepro/results/."""
    args = list(session.posargs)
    record = "--record" in args
    if record:
        args.remove("--record")
    return (ROOT / "results" if record else ROOT / ".minrepro" / "results"), args


def _torch(session: nox.Session) -> None:
    env = Path(session.virtualenv.location)
    site = SYSTEM_SITE or str(shared_site(env_python(env)))
    link_site(env, site)  # after the venv's own site-packages: the set's libraries installed here still win
    session.log(f"torch from {site}")


def _regenerate_docs(session: nox.Session, where: Path, env: dict[str, str]) -> None:
    """Where the run recorded into results/, the catalog's pages follow it (`minrepro docs`)."""
    if where == ROOT / "results":
        session.run(
            "python",
            "-m",
            "minrepro",
            "docs",
            "--results",
            str(ROOT / "results"),
            "--docs",
            str(ROOT / "docs"),
            env=env,
        )


@nox.session(venv_params=VENV_PARAMS)
@nox.parametrize("vset", list(SETS), ids=list(SETS))
def minrepro(session: nox.Session, vset: str) -> None:
    """Run the catalog against one version set; CUDA cases run only where CUDA is present."""
    _torch(session)
    _install(session, *(str(r) for r in SETS[vset].requirements))
    where, args = _results_dir(session)
    env = {"PYTHONPATH": str(ROOT)}  # run the harness from the checkout, not an installed copy
    probe = session.run("python", "-c", "import torch; print(torch.cuda.is_available())", silent=True, env=env)
    machine = "cuda" if probe.strip().endswith("True") else "cpu"
    session.run(
        "python",
        "-m",
        "minrepro",
        "run",
        "--set",
        vset,
        "--jobs",
        str(os.cpu_count() or 1),
        "--warm",
        "--results",
        str(where / f"{vset}-{machine}.json"),
        *args,
        env=env,
    )
    _regenerate_docs(session, where, env)


@nox.session(venv_params=VENV_PARAMS)
@nox.parametrize("vset", list(SETS), ids=list(SETS))
def patched(session: nox.Session, vset: str) -> None:
    """Prove the patches on one version set: every case with a patch passes in a minrepro-created venv with
    the patches applied, and still fails as declared in its unpatched twin (both venvs under .minrepro/envs)."""
    _torch(session)
    session.install("packaging>=23")
    where, args = _results_dir(session)
    env = {"PYTHONPATH": str(ROOT)}
    wheelhouse = ["--wheelhouse", WHEELHOUSE] if WHEELHOUSE else []
    session.run(
        "python",
        "-m",
        "minrepro",
        "patch",
        "prove",
        "--set",
        vset,
        "--envs",
        str(ROOT / ".minrepro" / "envs"),
        "--results",
        str(where / "patched" / f"{vset}-{{machine}}.json"),
        "--jobs",
        str(os.cpu_count() or 1),
        *wheelhouse,
        *args,
        env=env,
    )
    _regenerate_docs(session, where, env)


@nox.session(venv_params=VENV_PARAMS)
def drift(session: nox.Session) -> None:
    """`minrepro drift`: the catalog's cases, controls and patch proofs on `latest` (the newest releases the index
    serves, resolved now; its venvs in minrepro's cache), against what the manifest declares for the newest snapshot.
    Exits non-zero on any change, and where the index cannot be reached. `-- --record` writes results/drift/ and
    regenerates the pages; `-- --propose` prints the manifest diff that would move the snapshot, applying nothing."""
    _torch(session)
    session.install("packaging>=23")
    wheelhouse = ["--wheelhouse", WHEELHOUSE] if WHEELHOUSE else []
    session.run(
        "python",
        "-m",
        "minrepro",
        "drift",
        "--jobs",
        str(os.cpu_count() or 1),
        "--warm",
        "--results",
        str(ROOT / "results"),
        "--docs",
        str(ROOT / "docs"),
        *wheelhouse,
        *session.posargs,
        env={"PYTHONPATH": str(ROOT)},
    )


TEST_SET = "pinned"  # the libraries the `libs` tests run against (the seeds' stack: most families fail there)


@nox.session(venv_params=VENV_PARAMS)
def tests(session: nox.Session) -> None:
    """The test suite, with torch and the pinned set's libraries, so that only tests needing a GPU (or a CPU feature)
    skip. The catalog's own cases (`-m catalog`) are left to `nox -s minrepro`, which runs them on every set; name
    them (`nox -s tests -- -m catalog`) to run them here."""
    _torch(session)
    _install(session, *(str(r) for r in SETS[TEST_SET].requirements))
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-m", "not catalog"]))


RUFF = "ruff==0.17.6"  # pinned: a new ruff release brings new findings, which should arrive as a change of their own
IMPORT_LINTER = "import-linter==2.17"  # pinned, like ruff


def _wheel_layout(where: Path) -> Path:
    """The packages' modules laid out as the wheel installs them (pyproject.toml's `packages` and `package-dir`:
    reducers/ becomes minrepro/reducers/), for a tool that reads packages from their files, as import-linter does."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped = setuptools.get("package-dir", {})
    shutil.rmtree(where, ignore_errors=True)
    for package in setuptools["packages"]:
        parent = max((p for p in mapped if package == p or package.startswith(p + ".")), key=len, default=None)
        folder = mapped[parent] + package[len(parent) :].replace(".", "/") if parent else package.replace(".", "/")
        target = where / package.replace(".", "/")
        target.mkdir(parents=True, exist_ok=True)
        for module in (ROOT / folder).glob("*.py"):
            shutil.copy2(module, target / module.name)
    return where


@nox.session
def lint(session: nox.Session) -> None:
    """ruff's checks and its format check, configured in pyproject.toml (`[tool.ruff]`), then the rooms' import
    contracts (`[tool.importlinter]`), read from the modules as the wheel lays them out; nothing is rewritten."""
    session.install(RUFF, IMPORT_LINTER)
    session.run("ruff", "check", *session.posargs)
    session.run("ruff", "format", "--check", *session.posargs)
    session.chdir(_wheel_layout(Path(session.create_tmp()) / "wheel-layout"))  # lint-imports reads packages from here
    session.run("lint-imports", "--config", str(ROOT / "pyproject.toml"), "--no-cache")


@nox.session(venv_backend="none")
def wheelhouse(session: nox.Session) -> None:
    """Download both sets' wheels for an offline box: `nox -s wheelhouse -- --dest DIR [--direct-only]`."""
    session.run(sys.executable, "-m", "minrepro.envs.wheelhouse", *session.posargs, env={"PYTHONPATH": str(ROOT)})
