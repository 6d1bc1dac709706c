"""Markers: `libs` needs torch + the HF libraries in this interpreter, `gpu` needs CUDA; both skip cleanly."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

HF_LIBS = ("torch", "transformers", "accelerate", "peft", "bitsandbytes")


def _has_libs() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in HF_LIBS)


def _has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    libs, cuda = _has_libs(), None
    for item in items:
        if "libs" in item.keywords and not libs:
            item.add_marker(pytest.mark.skip(reason="torch and the HF libraries are not installed here"))
        if "gpu" in item.keywords:
            cuda = _has_cuda() if cuda is None else cuda
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture
def write_script(tmp_path: Path):
    """Write a dedented script into tmp_path and return its path."""

    def write(source: str, name: str = "script.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True)
def _bytecode_check_forgotten():
    """`installed_without_bytecode` answers once per interpreter: a test's stand-in library must not decide for the next."""
    from minrepro.harness import bytecode

    bytecode.installed_without_bytecode.cache_clear()
    yield
    bytecode.installed_without_bytecode.cache_clear()


@pytest.fixture
def bytecode_kept(tmp_path, monkeypatch) -> Path:
    """Runs keep their bytecode under a cache of this test's own (the environment turns bytecode off, the libraries
    were installed without it): that cache's folder."""
    from minrepro.harness import bytecode

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(bytecode, "installed_without_bytecode", lambda *_: True)
    monkeypatch.setenv("MINREPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    return tmp_path / "cache" / "pycache"
