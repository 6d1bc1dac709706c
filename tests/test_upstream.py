"""Running a library's own tests: the extracted tree is its own pytest rootdir, and relative environment,
checkout and report paths work although pytest runs from the checkout."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from minrepro.envs import upstream


def _checkout(root: Path) -> Path:
    dest = root / "lib-v1"
    (dest / "tests").mkdir(parents=True)
    (dest / "tests" / "test_x.py").write_text(
        "import pytest\n\n@pytest.mark.unregistered_marker\ndef test_ok():\n    assert True\n\n"
        "def test_bad():\n    assert False\n",
        encoding="utf-8",
    )
    return dest


@pytest.mark.skipif(not (Path(sys.prefix) / "bin" / "python").exists(), reason="needs a POSIX venv layout")
def test_run_tests_with_relative_paths_and_own_rootdir(tmp_path, monkeypatch):
    _checkout(tmp_path / "cache")
    monkeypatch.chdir(tmp_path)
    checkout = upstream.tests_checkout("lib", "v1", None, Path("cache"))  # already extracted: reused, made a rootdir
    assert (checkout / "pytest.ini").read_text() == "[pytest]\n"
    env = Path(os.path.relpath(sys.prefix, tmp_path))
    run = upstream.run_tests(
        env, checkout, ["tests/test_x.py"], Path("cache/out.xml"), upstream.PytestConditions(timeout=120)
    )
    assert run.outcomes == {"tests.test_x::test_ok": "passed", "tests.test_x::test_bad": "failed"}
    assert Path("cache/out.log").is_file()


def test_new_failures_are_only_those_not_failing_in_the_baseline():
    baseline = upstream.TestRun({"a": "failed", "b": "passed", "c": "skipped"}, 1.0)
    patched = upstream.TestRun({"a": "failed", "b": "failed", "c": "failed", "d": "failed"}, 1.0)
    assert upstream.new_failures(baseline, patched) == ["b", "c", "d"]


def test_a_failed_test_keeps_the_first_line_of_why():
    # a kit whose new test fails after the fix must say why (a conftest hook, not the bug, failed it on a GPU)
    from minrepro.envs.upstream import failure_reasons, parse_junit

    xml = (
        "<testsuites><testsuite>"
        '<testcase classname="tests.test_other.TestX" name="test_a"><failure message="AssertionError: '
        '**Transformers Deprecation**: x&#10;more">tb</failure></testcase>'
        '<testcase classname="tests.test_other.TestX" name="test_b"><error>RuntimeError: boom&#10;tb</error></testcase>'
        '<testcase classname="tests.test_other.TestX" name="test_c"/></testsuite></testsuites>'
    )
    assert parse_junit(xml)["tests.test_other.TestX::test_c"] == "passed"
    assert failure_reasons(xml) == {
        "tests.test_other.TestX::test_a": "AssertionError: **Transformers Deprecation**: x",
        "tests.test_other.TestX::test_b": "RuntimeError: boom",
    }


def test_a_candidate_changes_a_failure_only_if_its_signature_changes():
    """T's case fails with a number read from uninitialized memory: `max error 0.413` in the clean env and `1.87e+27`
    in a candidate's, a comment-only diff included. validate said "failing differently"; a failure's identity is its
    signature (normalized message, library frames), not its final line."""
    from minrepro.catalog.run import CaseResult
    from minrepro.envs.validate import status
    from minrepro.harness.signature import parse_traceback

    def failed(last_line: str) -> CaseResult:
        trace = (
            'Traceback (most recent call last):\n  File "/tmp/case.py", line 30, in <module>\n'
            f"    torch.testing.assert_close(out, ref)\n{last_line}\n"
        )
        return CaseResult("t", "T", "cpu", "fail", "fail", last_line, parse_traceback(trace).to_dict(), 0.1, "")

    before = failed("AssertionError: LoRA on an offloaded layer changed the output: max error 0.413")
    assert (
        status(before, failed("AssertionError: LoRA on an offloaded layer changed the output: max error 1.87e+27"))
        == "still fails"
    )
    assert status(before, failed("KeyError: 'base_model.model.lm_head.weight'")) == "changed"


def test_a_validation_that_ran_no_library_tests_does_not_say_they_found_nothing():
    from minrepro.envs.validate import SetReport, verdict

    rows = [{"case": "t", "status": "still fails"}]
    assert verdict([SetReport("newest", "env", ["peft/peft_model.py"], rows)]).endswith(
        "upstream tests: not run (--upstream-tests runs them)"
    )
    ran = SetReport("newest", "env", ["peft/peft_model.py"], rows, upstream={"new_failures": []})
    assert verdict([ran]).endswith("upstream tests: 0 new failure(s)")
