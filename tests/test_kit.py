"""PR kits: the regression test's place in the library's test file, the ruff pin, the repro as a maintainer runs it."""

from __future__ import annotations

import ast

import pytest

from minrepro.envs.patching import PATCHES_DIR
from minrepro.errors import MinreproError
from minrepro.catalog.manifest import load_catalog
from minrepro.reports.kit import KitProof, describe_pr, insert_test, read_test, ruff_requirement, standalone

TEST_FILE = """import unittest

from transformers.testing_utils import require_torch


class ModelingUtilsTester(unittest.TestCase):
    def test_a(self):
        assert True


def helper():
    return 1
"""


def test_every_regression_test_names_its_file_and_parses_in_place(tmp_path):
    tests = sorted(PATCHES_DIR.glob("*/*.test"))
    assert tests, "no regression tests under patches/"
    for path in tests:
        test = read_test(path)
        # transformers' tests sit in folders (tests/utils/, tests/quantization/bnb/)
        assert test.test_file.startswith("tests/") and test.test_file.rsplit("/", 1)[1].startswith("test_")
        assert test.name.startswith("test_")
        assert (path.with_suffix(".diff")).is_file(), f"{path.name} has no fix beside it"
        source = TEST_FILE.replace("ModelingUtilsTester", test.test_class or "ModelingUtilsTester")
        ast.parse(insert_test(source, test))  # indented as it will stand


def test_a_method_goes_at_the_end_of_its_class_and_a_class_at_the_end_of_the_module(tmp_path):
    path = tmp_path / "x.test"
    path.write_text(
        "# Test-file: tests/test_x.py\n# Test-class: ModelingUtilsTester\n    def test_new(self):\n        assert 1\n"
    )
    test = read_test(path)
    tree = ast.parse(insert_test(TEST_FILE, test))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert [f.name for f in cls.body] == [
        "test_a",
        "test_new",
    ] and test.node_id == "tests/test_x.py::ModelingUtilsTester::test_new"
    assert isinstance(tree.body[-1], ast.FunctionDef) and tree.body[-1].name == "helper"
    path.write_text("# Test-file: tests/test_x.py\nclass TestNew:\n    def test_new(self):\n        assert 1\n")
    assert ast.parse(insert_test(TEST_FILE, read_test(path))).body[-1].name == "TestNew"


def test_a_test_without_its_file_or_class_is_a_one_line_error(tmp_path):
    path = tmp_path / "x.test"
    path.write_text("    def test_new(self):\n        assert 1\n")
    with pytest.raises(MinreproError, match="Test-file"):
        read_test(path)
    path.write_text("# Test-file: tests/test_x.py\n# Test-class: Missing\n    def test_new(self):\n        pass\n")
    with pytest.raises(MinreproError, match="no class Missing"):
        insert_test(TEST_FILE, read_test(path))


def test_the_repositorys_ruff_pin_is_used(tmp_path):
    (tmp_path / "setup.py").write_text('extras["quality"] = ["ruff == 0.13.1"]\n')
    assert ruff_requirement(tmp_path) == "ruff==0.13.1"
    (tmp_path / "setup.py").write_text('extras["quality"] = ["ruff~=0.12.8", "hf-doc-builder"]\n')
    assert ruff_requirement(tmp_path) == "ruff~=0.12.8"
    (tmp_path / "setup.py").unlink()
    assert ruff_requirement(tmp_path) == "ruff"


def test_the_repro_in_a_pr_has_no_release_pins():
    script = '# /// script\n# dependencies = ["accelerate==1.13.0"]\n# ///\n"""Doc."""\nimport torch\n'
    assert standalone(script) == '"""Doc."""\nimport torch'


def test_a_parametrized_regression_test_fails_if_any_of_its_cases_fails():
    from minrepro.envs.upstream import TestRun
    from minrepro.reports.kit import _outcome

    run = TestRun(
        {
            "tests.test_other.TestX::test_merge[4bit]": "passed",
            "tests.test_other.TestX::test_merge[8bit]": "failed",
            "tests.test_other.TestX::test_merge_more": "passed",
        },
        1.0,
    )
    assert _outcome(run, "tests/test_other.py::test_merge") == "failed"
    assert _outcome(run, "tests/test_other.py::test_merge_more") == "passed"
    assert _outcome(run, "tests/test_other.py::test_missing") == "not collected"


def test_a_fix_that_needs_an_earlier_familys_goes_in_as_a_series(tmp_path, monkeypatch):
    # F's fix (merge_and_unload(dequantize=True)) needs G's float-base merge: the kit applies both, one commit each
    import subprocess
    from types import SimpleNamespace

    from minrepro.envs.refs import RepoRef
    from minrepro.reports import kit

    repo = tmp_path / "peft"
    (repo / "src" / "peft").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "peft" / "__init__.py").write_text('__version__ = "0.20.1.dev0"\n')
    (repo / "src" / "peft" / "bnb.py").write_text("def merge():\n    return 1\n")
    (repo / "tests" / "test_other.py").write_text("import torch\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Base (#1)"], check=True)
    patches = tmp_path / "patches" / "peft"
    patches.mkdir(parents=True)
    for name, old, new in (("g", "    return 1", "    return 2"), ("f", "    return 2", "    return 3")):
        (patches / f"{name}.diff").write_text(
            f"Subject: [PATCH] peft: fix {name}\nCase: {name}\n\nWhy {name}.\n---\n--- a/src/peft/bnb.py\n+++ b/src/peft/bnb.py\n"
            f"@@ -1,2 +1,2 @@\n def merge():\n-{old}\n+{new}\n"
        )
    (patches / "f.test").write_text("# Test-file: tests/test_other.py\ndef test_f():\n    assert True\n")
    monkeypatch.setattr(kit, "PATCHES_DIR", tmp_path / "patches")
    case = SimpleNamespace(id="f-case", patches=("peft/g", "bitsandbytes/x", "peft/f"), upstream=())
    diffs, test = kit.patch_for(case, "peft")
    assert [d.stem for d in diffs] == ["g", "f"] and test.name == "f.test"
    proof = kit.build_branch(case, RepoRef("peft", repo), tmp_path / "work")
    assert len(proof.commits) == 3 and proof.title == "peft: fix f"
    log = subprocess.run(
        ["git", "-C", str(tmp_path / "work"), "log", "--format=%s", "-3"], capture_output=True, text=True
    )
    assert log.stdout.split("\n")[:3] == ["peft: fix f", "peft: fix g", "Add a regression test: test_f"]
    assert (tmp_path / "work" / "src" / "peft" / "bnb.py").read_text() == "def merge():\n    return 3\n"


def test_tests_that_fail_on_main_are_not_rerun_after_the_fix():
    # they cannot be new failures; peft's hub tests sleep through retries for ~47 s each
    from minrepro.envs.upstream import TestRun
    from minrepro.reports.kit import _deselect, node_id

    assert (
        node_id("tests/test_other.py", "tests.test_other.TestX::test_y[a-b]")
        == "tests/test_other.py::TestX::test_y[a-b]"
    )
    assert node_id("tests/test_other.py", "tests.test_other::test_z") == "tests/test_other.py::test_z"
    main = TestRun({"tests.test_other.TestX::test_hub[opt]": "failed", "tests.test_other::test_ok": "passed"}, 1.0)
    assert _deselect(main, "tests/test_other.py") == ["--deselect", "tests/test_other.py::TestX::test_hub[opt]"]


def test_a_pr_says_where_its_tests_ran():
    # a GPU-only regression test "proved" on a CPU box is two skips: the description must say which box it was
    (case,) = load_catalog().select(["int8-offload-backward-scb"])
    proof = KitProof(
        case=case.id,
        library="accelerate",
        base={"commit": "0" * 40, "date": "2026-07-24"},
        branch="b",
        title="t",
        commits=["a", "b"],
        test="tests/test_x.py::T::test_y",
        machine="1 x NVIDIA H100 80GB HBM3, torch 2.11.0",
        case_after="passes",
        case_after_printed=["offload hooks on ['1']", "input grad on cuda:0"],
    )
    text = describe_pr(case, proof, "why")
    assert "- ran on: 1 x NVIDIA H100 80GB HBM3, torch 2.11.0\n" in text
    # and what the passing case reached: the offloaded INT8 layer, not a path around it
    assert "With the fix: passes.\nIt printed:\n\n```\noffload hooks on ['1']\ninput grad on cuda:0\n```" in text


def test_a_kit_whose_pytest_options_left_no_test_of_the_file_on_main_is_not_green():
    # AB's kit on two H200s ran `-k RedispatchMovesInputs`: nothing of tests/test_other.py ran on main, so "no new
    # failure in its file" said nothing, yet the kit called itself green
    (case,) = load_catalog().select(["peft-redispatch-drops-input-hook"])
    proof = KitProof(
        case=case.id,
        library="peft",
        base={"commit": "0" * 40, "date": "2026-08-21"},
        branch="b",
        title="t",
        commits=["a", "b"],
        test="tests/test_other.py::test_y",
        test_before="failed",
        test_after="passed",
        case_after="passes",
        case_after_outcome="pass",
        lint={"ruff check": "ok"},
        file_counts={
            "main": {"passed": 0, "failed": 0, "skipped": 0},
            "after": {"passed": 1, "failed": 0, "skipped": 0},
        },
    )
    assert not proof.green
    assert "new failures: not measured" in describe_pr(case, proof, "why")
    proof.file_counts["main"]["passed"] = 40
    assert proof.green and "new failures: none" in describe_pr(case, proof, "why")
