"""PR kits made against a release's source: the archive as a git repository, the test files it lacks, and a kit
that says which release it was made against. Local fake archives only: no index is asked."""

from __future__ import annotations

import ast
import io
import subprocess
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from minrepro.errors import MinreproError
from minrepro.reports import kit, release
from minrepro.reports.release import Release, parse_release, relative_imports, release_repo

MODEL = "def forward():\n    return 1\n"


def _sdist(folder: Path, version: str = "9.9.0", tests: dict[str, str] | None = None) -> Path:
    """A transformers-like sdist: src/transformers, a pyproject pinning nothing, and the given test files."""
    files = {
        "PKG-INFO": f"Name: transformers\nVersion: {version}\n",
        "pyproject.toml": "[tool.ruff]\nline-length = 119\n",
        "src/transformers/__init__.py": f'__version__ = "{version}"\n',
        "src/transformers/model.py": MODEL,
        **(tests or {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"transformers-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"transformers-{version}/{name}")
            info.size, info.mtime = len(data), 1_790_000_000
            tar.addfile(info, io.BytesIO(data))
    return archive


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_a_release_is_lib_equals_version_or_a_one_line_error():
    assert parse_release("transformers==5.24.0") == Release("transformers", "5.24.0")
    assert parse_release(" Transformers == 5.24.0 ").spec == "transformers==5.24.0"
    for bad in ("transformers", "transformers>=5.0", "torch==2.13.0", "transformers==latest"):
        with pytest.raises(MinreproError, match="--release takes LIB==VERSION") as error:
            parse_release(bad)
        assert "\n" not in str(error.value)


def test_the_release_becomes_one_commit_named_for_it_with_the_test_files_it_lacks(tmp_path):
    root = tmp_path / "cache" / "transformers-9.9.0"
    _sdist(root / "archive")  # already downloaded: the index is not asked
    given = tmp_path / "given"
    (given / "tests" / "utils").mkdir(parents=True)
    (given / "tests" / "utils" / "test_model.py").write_text(
        "from ..helpers import check\n\n\ndef test_a():\n    check()\n"
    )
    (given / "tests" / "helpers.py").write_text("def check():\n    pass\n")
    repo, record = release_repo(Release("transformers", "9.9.0"), ["tests/utils/test_model.py"], given, root)
    assert _git(repo.gitdir, "log", "--format=%s").splitlines() == ["transformers 9.9.0 (released source)"]
    assert (repo.gitdir / "src" / "transformers" / "model.py").read_text() == MODEL
    # the file the test imports came along, and both are named in the commit and the record
    assert sorted(record["tests_from_outside"]) == ["tests/helpers.py", "tests/utils/test_model.py"]
    assert "tests/helpers.py (sha256 " in _git(repo.gitdir, "log", "-1", "--format=%b")
    assert record["release"] == "transformers==9.9.0" and record["archive"] == "transformers-9.9.0.tar.gz"
    assert repo.describe(repo.commit())["version"] == "9.9.0"
    # the same archive and files again: the same repository and commit, not rebuilt
    head = repo.commit()
    again, _ = release_repo(Release("transformers", "9.9.0"), ["tests/utils/test_model.py"], given, root)
    assert again.commit() == head


def test_a_test_file_the_release_lacks_is_a_one_line_error_naming_it(tmp_path):
    root = tmp_path / "transformers-9.9.0"
    _sdist(root / "archive", tests={"tests/test_common.py": "def test_c():\n    pass\n"})
    with pytest.raises(MinreproError, match=r"has no tests/utils/test_model\.py: .*--release-tests DIR") as error:
        release_repo(Release("transformers", "9.9.0"), ["tests/utils/test_model.py"], None, root)
    assert "\n" not in str(error.value)
    # given, but what it imports is missing from the archive and the folder alike
    given = tmp_path / "given" / "tests" / "utils"
    given.mkdir(parents=True)
    (given / "test_model.py").write_text("from ..test_modeling_common import ModelTesterMixin\n")
    with pytest.raises(MinreproError, match=r"has no tests/test_modeling_common\.py: .* lacks it too"):
        release_repo(Release("transformers", "9.9.0"), ["tests/utils/test_model.py"], given.parent.parent, root)
    # a test file the sdist carries needs nothing else
    _, record = release_repo(Release("transformers", "9.9.0"), ["tests/test_common.py"], None, root)
    assert record["tests_from_outside"] == {} and record["tests_in_archive"] == 1


def test_relative_imports_name_the_files_they_need():
    source = "from ..test_modeling_common import A\nfrom . import helpers\nfrom .x.y import z\nimport os\n"
    assert relative_imports(source, "tests/utils/test_a.py") == [
        "tests/test_modeling_common.py",
        "tests/utils/helpers.py",
        "tests/utils/x/y.py",
    ]


def test_a_wheel_is_laid_out_as_the_repository(tmp_path):
    folder = tmp_path / "archive"
    folder.mkdir()
    with zipfile.ZipFile(folder / "transformers-9.9.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("transformers/__init__.py", '__version__ = "9.9.0"\n')
        wheel.writestr("transformers/model.py", MODEL)
        wheel.writestr("transformers-9.9.0.dist-info/METADATA", "Name: transformers\n")
    given = tmp_path / "given" / "tests"
    given.mkdir(parents=True)
    (given / "test_model.py").write_text("def test_a():\n    pass\n")
    repo, record = release_repo(Release("transformers", "9.9.0"), ["tests/test_model.py"], given.parent, tmp_path)
    assert (repo.gitdir / "src" / "transformers" / "model.py").read_text() == MODEL
    assert not (repo.gitdir / "transformers-9.9.0.dist-info").exists() and record["archive"].endswith(".whl")


def _pip_says(monkeypatch, output: str):
    monkeypatch.setattr(
        release.subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=1, stdout="", stderr=output)
    )


def test_offline_or_no_such_release_is_a_one_line_error(tmp_path, monkeypatch):
    _pip_says(
        monkeypatch,
        "WARNING: Retrying ... NewConnectionError('Failed to establish a new connection')\n"
        "ERROR: Could not find a version that satisfies the requirement transformers==9.9.0\n",
    )
    with pytest.raises(MinreproError, match=r"out of reach \(offline\?\)") as error:
        release.download(Release("transformers", "9.9.0"), tmp_path)
    assert "\n" not in str(error.value)
    _pip_says(monkeypatch, "ERROR: No matching distribution found for transformers==9.9.0\n")
    with pytest.raises(MinreproError, match=r"the package index has no sdist or wheel of transformers==9\.9\.0"):
        release.download(Release("transformers", "9.9.0"), tmp_path)


def test_a_wheelhouse_s_sdist_is_taken_as_it_is_offline(tmp_path, monkeypatch):
    """Offline, `pip download` of an sdist fails to build its metadata and falls back to the wheel: the wheelhouse's
    sdist is copied instead, pip never asked."""
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for name in ("transformers-9.9.0.tar.gz", "transformers-9.9.0-py3-none-any.whl"):
        (wheelhouse / name).write_bytes(name.encode())
    _pip_says(monkeypatch, "ERROR: pip must not be asked\n")
    found = release.download(Release("transformers", "9.9.0"), tmp_path / "archive", wheelhouse)
    assert found == tmp_path / "archive" / "transformers-9.9.0.tar.gz"
    assert found.read_bytes() == b"transformers-9.9.0.tar.gz"


def test_a_kit_made_against_a_release_says_so_in_its_commits_and_its_description(tmp_path, monkeypatch):
    root = tmp_path / "transformers-9.9.0"
    test_file = "import unittest\n\n\nclass ModelTest(unittest.TestCase):\n    def test_one(self):\n        pass\n"
    _sdist(root / "archive", tests={"tests/test_model.py": test_file})
    repo, record = release_repo(Release("transformers", "9.9.0"), ["tests/test_model.py"], None, root)
    patches = tmp_path / "patches" / "transformers"
    patches.mkdir(parents=True)
    (patches / "fix.diff").write_text(
        "Subject: [PATCH] model: return 2\nCase: fix\n\nWhy.\n---\n--- a/src/transformers/model.py\n"
        "+++ b/src/transformers/model.py\n@@ -1,2 +1,2 @@\n def forward():\n-    return 1\n+    return 2\n"
    )
    (patches / "fix.test").write_text(
        "# Test-file: tests/test_model.py\n# Test-class: ModelTest\n    def test_two(self):\n        assert True\n"
    )
    monkeypatch.setattr(kit, "PATCHES_DIR", tmp_path / "patches")
    script = tmp_path / "fix.py"
    script.write_text("print(1)\n")
    case = SimpleNamespace(id="fix", patches=("transformers/fix",), upstream=(), script=script)
    proof = kit.build_branch(case, repo, tmp_path / "work", "transformers 9.9.0's released source")
    proof.release = record
    body = _git(tmp_path / "work", "log", "--format=%B", "-1", proof.commits[0])
    assert "It fails on transformers 9.9.0's released source: fix" in body
    assert proof.base["subject"] == "transformers 9.9.0 (released source)" and proof.base["version"] == "9.9.0"
    text = kit.describe_pr(case, proof, "Why.")
    assert "Made against transformers 9.9.0's released source, not `main`" in text
    assert "## Reproduction (fails on transformers 9.9.0)" in text and "On transformers 9.9.0 without" in text
    assert "fails on `main`" not in text
    # a kit from a fetched main keeps its words
    proof.release = {}
    assert "Fixes the failure below on `main`" in kit.describe_pr(case, proof, "Why.")


def test_a_decorator_the_test_needs_joins_the_files_own_import(tmp_path):
    source = (
        "import unittest\n\nfrom transformers.testing_utils import require_accelerate, require_torch\n\n\n"
        "class DeviceMapTest(unittest.TestCase):\n    def test_a(self):\n        pass\n"
    )
    path = tmp_path / "x.test"
    path.write_text(
        "# Test-file: tests/utils/test_device_map.py\n# Test-class: DeviceMapTest\n"
        "# Test-import: from transformers.testing_utils import require_torch_multi_accelerator\n"
        "    @require_torch_multi_accelerator\n    def test_b(self):\n        pass\n"
    )
    test = kit.read_test(path)
    text = kit.insert_test(source, test)
    assert (
        "from transformers.testing_utils import require_accelerate, require_torch, require_torch_multi_accelerator\n"
        in text
    )
    ast.parse(text)
    long = source.replace("require_torch\n", "require_torch, " + ", ".join(f"require_{i}" for i in range(12)) + "\n")
    merged = kit.insert_test(long, test)
    assert (
        "from transformers.testing_utils import (\n    require_0,\n" in merged and "    require_torch_multi" in merged
    )
    with pytest.raises(MinreproError, match=r"no 'from transformers\.testing_utils import"):
        kit.insert_test("import unittest\n\n\nclass DeviceMapTest(unittest.TestCase):\n    pass\n", test)
    path.write_text("# Test-file: tests/x.py\n# Test-import: import os\ndef test_c():\n    pass\n")
    with pytest.raises(MinreproError, match="Test-import: from MODULE import NAME"):
        kit.read_test(path)
