"""The installed tool is the checkout's tool: a wheel installed into a fresh venv, run from a directory outside
the checkout, finds its patches, its cases and its version sets under the one `minrepro` namespace."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel (its one dependency, packaging, is made visible by a .pth file)."""
    tmp = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    [wheel] = (tmp / "dist").glob("minrepro-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not any(n.startswith(("reducers/", "patches/")) for n in names)  # no top-level packages of its own
    assert "minrepro/patches/accelerate/params4bit-hf-initialized.diff" in names
    env = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    visible = {str(Path(importlib.util.find_spec("packaging").origin).parents[1])}
    if all(importlib.util.find_spec(n) for n in ("torch", "accelerate", "bitsandbytes")):
        visible.add(str(Path(importlib.util.find_spec("torch").origin).parents[1]))
    Path(site, "_test_deps.pth").write_text("\n".join(sorted(visible)) + "\n")
    return env


def _minrepro(env: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(env / "bin" / "minrepro"), *args], capture_output=True, text=True, cwd=cwd)


def test_the_installed_tool_lists_its_patches_and_cases_from_outside_the_checkout(installed, tmp_path):
    patches = _minrepro(installed, "patch", "list", cwd=tmp_path)
    assert patches.returncode == 0, patches.stderr
    assert "accelerate/params4bit-hf-initialized" in patches.stdout and str(ROOT) not in patches.stdout
    cases = _minrepro(installed, "list", cwd=tmp_path)
    assert cases.returncode == 0 and "quant-state-meta-item" in cases.stdout
    where = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import minrepro.reducers, minrepro.envs.patching as p; print(minrepro.reducers.__file__, p.PATCHES_DIR)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert str(installed) in where.stdout and str(ROOT) not in where.stdout


def test_the_installed_tool_runs_a_case_from_outside_the_checkout(installed, tmp_path):
    # the case script ships in the wheel and runs in this venv; with the heavy libraries visible it fails as declared
    run = _minrepro(installed, "run", "params4bit-hf-initialized", "--json", cwd=tmp_path)
    [result] = json.loads(run.stdout.strip().splitlines()[-1])["cases"]
    assert result["case"] == "params4bit-hf-initialized" and result["observed"] != "skipped"
    if importlib.util.find_spec("bitsandbytes") is None:
        assert "ModuleNotFoundError" in result["headline"]  # ran, in the venv, without the libraries
    else:
        assert result["verdict"] in ("as declared", "no expectation"), result


def test_every_package_of_the_checkout_is_in_the_wheel():
    # a subpackage left out of pyproject.toml's list imports in a checkout and is missing from the installed tool
    import os
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for top, name in (("minrepro", "minrepro"), ("reducers", "minrepro.reducers"), ("patches", "minrepro.patches")):
        for folder, _, files in os.walk(ROOT / top):  # the links in minrepro/ are not followed: listed by name
            if "__init__.py" in files:
                found.add(".".join((name, *Path(folder).relative_to(ROOT / top).parts)))
    assert found == listed


def test_the_checkout_links_the_search_and_the_patches_into_the_package():
    # the checkout imports minrepro.reducers from reducers/ itself: one module, under the wheel's name
    import minrepro.patches
    import minrepro.reducers

    assert Path(minrepro.reducers.__file__).resolve() == (ROOT / "reducers" / "__init__.py").resolve()
    assert Path(next(iter(minrepro.patches.__path__))).resolve() == (ROOT / "patches").resolve()
