"""PR kits: the regression test's place in the library's test file, the ruff pin, the repro as a maintainer runs it."""

from __future__ import annotations

import ast

import pytest

from minrepro.envs.patching import PATCHES_DIR
from minrepro.errors import MinreproError
from minrepro.reports.kit import insert_test, read_test, ruff_requirement, standalone

TEST_FILE = '''import unittest


class ModelingUtilsTester(unittest.TestCase):
    def test_a(self):
        assert True


def helper():
    return 1
'''


def test_every_regression_test_names_its_file_and_parses_in_place(tmp_path):
    tests = sorted(PATCHES_DIR.glob("*/*.test"))
    assert tests, "no regression tests under patches/"
    for path in tests:
        test = read_test(path)
        assert test.test_file.startswith("tests/test_") and test.name.startswith("test_")
        assert (path.with_suffix(".diff")).is_file(), f"{path.name} has no fix beside it"
        source = TEST_FILE.replace("ModelingUtilsTester", test.test_class or "ModelingUtilsTester")
        ast.parse(insert_test(source, test))  # indented as it will stand


def test_a_method_goes_at_the_end_of_its_class_and_a_class_at_the_end_of_the_module(tmp_path):
    path = tmp_path / "x.test"
    path.write_text("# Test-file: tests/test_x.py\n# Test-class: ModelingUtilsTester\n"
                    "    def test_new(self):\n        assert 1\n")
    test = read_test(path)
    tree = ast.parse(insert_test(TEST_FILE, test))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert [f.name for f in cls.body] == ["test_a", "test_new"] and test.node_id == \
        "tests/test_x.py::ModelingUtilsTester::test_new"
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

    run = TestRun({"tests.test_other.TestX::test_merge[4bit]": "passed", "tests.test_other.TestX::test_merge[8bit]": "failed",
                   "tests.test_other.TestX::test_merge_more": "passed"}, 1.0)
    assert _outcome(run, "tests/test_other.py::test_merge") == "failed"
    assert _outcome(run, "tests/test_other.py::test_merge_more") == "passed"
    assert _outcome(run, "tests/test_other.py::test_missing") == "not collected"
