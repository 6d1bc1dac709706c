"""The affected libraries' own tests, before and after the patches: only new failures are reported.

The tests come from a source checkout at a release tag (PyPI sdists lack them or ship them broken): a
path given by the user (a checkout, or a git directory from which `git archive` takes the tag), or else a
shallow clone of the release tag. Only `tests/` is extracted, so the code under test is the installed,
patched package, never the checkout's.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from minrepro.envs.venvs import env_python
from minrepro.errors import MinreproError

REPOS = {
    "accelerate": "https://github.com/huggingface/accelerate",
    "peft": "https://github.com/huggingface/peft",
    "bitsandbytes": "https://github.com/bitsandbytes-foundation/bitsandbytes",
}
TAGS = {"accelerate": "v{}", "peft": "v{}", "bitsandbytes": "{}"}
# The tests that exercise the patched code paths (issue: offload, hooks, 4-bit modules, functional).
SELECTIONS = {
    "accelerate": ["tests/test_big_modeling.py", "tests/test_modeling_utils.py"],
    "peft": ["tests/test_gpu_examples.py", "-k", "offload"],
    "bitsandbytes": ["tests/test_linear4bit.py", "tests/test_functional.py"],
}
# What the test files import beyond the library (bnb[test] pins transformers<5, so these are by hand).
TEST_REQUIREMENTS = {
    "accelerate": ["pytest", "parameterized", "pytest-subtests"],
    "peft": ["pytest", "parameterized", "datasets", "scipy"],
    "bitsandbytes": ["pytest", "einops", "scipy", "lion-pytorch"],
    "transformers": ["pytest", "parameterized", "pytest-timeout"],
}
# Hub models the selected tests load by id. Offline (a GPU box without the hub), a stand-in with the published
# config and random weights is written where from_pretrained looks first, the tests' working directory, and
# rebuilt before each run (tests may write into it). A hub-cache layout is not used: peft's `hub_online_once`
# forces online mode, and the client's retries then take minutes per test. The offload tests compare a model
# with itself under two placements, so the weights' values do not matter.
STAND_INS = {"peft": ["gpt2"]}
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class TestRun:
    outcomes: dict[str, str]  # test id -> passed | failed | skipped
    seconds: float
    reasons: dict[str, str] = field(default_factory=dict)  # failed test id -> its failure's first line

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


@dataclass(frozen=True)
class PytestConditions:
    """What the upstream tests run under: the seconds pytest has, and `offline` (`OFFLINE_ENV`: no hub)."""

    timeout: float
    offline: bool = False


def tests_checkout(library: str, ref: str, source: Path | None, cache: Path) -> Path:
    """A directory holding the library's `tests/` at `ref`."""
    dest = cache / f"{library}-{ref}"
    if (dest / "tests").is_dir():
        return _own_rootdir(dest)
    if source is not None and (source / "tests").is_dir() and not (source / "HEAD").is_file():
        return source  # a plain checkout, used as it is
    git_dir = source if source is not None else _clone(library, ref, cache)
    archive = subprocess.run(
        [
            "git",
            "--git-dir",
            str(git_dir if (git_dir / "HEAD").is_file() else git_dir / ".git"),
            "archive",
            "--format=tar",
            ref,
            "tests",
        ],
        capture_output=True,
    )
    if archive.returncode != 0:
        raise MinreproError(f"no tests/ at {ref} in {git_dir}: {archive.stderr.decode().strip()[-200:]}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return _own_rootdir(dest)


def _own_rootdir(dest: Path) -> Path:
    """An empty pytest.ini makes the extracted tree pytest's rootdir: without it pytest climbs to the nearest
    config above (this project's own, with strict markers, when the cache sits inside a checkout of it)."""
    if not (dest / "pytest.ini").is_file():
        (dest / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return dest


def _clone(library: str, ref: str, cache: Path) -> Path:
    target = cache / f"{library}-{ref}.git"
    if not target.exists():
        proc = subprocess.run(
            ["git", "clone", "--bare", "--depth", "1", "--branch", ref, REPOS[library], str(target)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise MinreproError(f"cannot clone {REPOS[library]} at {ref}: {proc.stderr.strip()[-200:]}")
    return target


def write_stand_ins(library: str, env: Path, checkout: Path) -> None:
    """Fresh stand-ins, in the tests' working directory, for the hub models the library's tests load."""
    for model_id in STAND_INS.get(library, []):
        shutil.rmtree(checkout / model_id, ignore_errors=True)
        proc = subprocess.run(
            [
                str(env_python(Path(env).absolute())),
                str(Path(__file__).with_name("_stand_in.py")),
                model_id,
                str(checkout / model_id),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise MinreproError(
                f"cannot build a stand-in for {model_id}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
            )


def run_tests(env: Path, checkout: Path, selection: list[str], junit: Path, conditions: PytestConditions) -> TestRun:
    """pytest in `env` from the checkout's root; outcomes per test id from the JUnit XML."""
    junit = junit.absolute()  # pytest runs from the checkout
    junit.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timeout = conditions.timeout
    environ = {**os.environ, **(OFFLINE_ENV if conditions.offline else {})}
    try:
        proc = subprocess.run(
            [
                str(env_python(Path(env).absolute())),
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--junitxml",
                str(junit),
                *selection,
            ],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environ,
        )
    except subprocess.TimeoutExpired:
        raise MinreproError(f"upstream tests timed out after {timeout:.0f} s in {env}") from None
    junit.with_suffix(".log").write_text(proc.stdout + proc.stderr, encoding="utf-8")  # for reading failures
    if not junit.is_file():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        raise MinreproError(f"pytest wrote no report in {env}: {tail[0]}")
    xml = junit.read_text(encoding="utf-8")
    return TestRun(parse_junit(xml), time.monotonic() - start, failure_reasons(xml))


def parse_junit(xml: str) -> dict[str, str]:
    outcomes = {}
    for case in ET.fromstring(xml).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        outcomes[name] = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
    return outcomes


def failure_reasons(xml: str) -> dict[str, str]:
    """Failed test id -> the first line of its failure or error message: a kit that says "failed" says why."""
    reasons = {}
    for case in ET.fromstring(xml).iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                text = (child.get("message") or child.text or "").strip()
                reasons[f"{case.get('classname')}::{case.get('name')}"] = (text.splitlines() or [child.tag])[0][:300]
                break
    return reasons


def new_failures(baseline: TestRun, patched: TestRun) -> list[str]:
    """Tests that fail with the patches and did not fail without them (a test missing from the baseline
    counts as not failing there)."""
    return sorted(t for t, o in patched.outcomes.items() if o == "failed" and baseline.outcomes.get(t) != "failed")
