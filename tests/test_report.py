"""Issue drafts: every catalog case gets one for a real repository, in that repository's template order,
with the script, no handles, and no internal family labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from minrepro.errors import MinreproError

from minrepro.catalog.manifest import USER_SCRIPT, load_catalog
from minrepro.reports.report import REPOSITORIES, TEMPLATES, draft, render_markdown

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _recorded(case) -> bool:
    # a whole-set record, or a single case's (the two-GPU case: its one-GPU whole-set runs skipped it)
    from minrepro.catalog.matrix import load_results, load_single_cases

    docs = [*load_results(RESULTS).values(), *load_single_cases(RESULTS / "cases").values()]
    return any(c["case"] == case.id and c["observed"] != "skipped" for doc in docs for c in doc["cases"])


def test_every_case_drafts_to_its_repository_template():
    catalog = load_catalog()
    for case in catalog.cases:
        if not _recorded(case):  # nothing recorded to draft from: a one-line error, never a blank draft
            with pytest.raises(MinreproError, match="no recorded run of"):
                draft(case, catalog, RESULTS, python=Path("/nonexistent/python"))
            continue
        report = draft(case, catalog, RESULTS, python=Path("/nonexistent/python"))
        text = render_markdown(report)
        assert report["repository"] in REPOSITORIES.values()
        library = report["repository"].split("/")[1]
        positions = [text.index(f"### {section}") for section in TEMPLATES[library]]
        assert positions == sorted(positions), case.id
        assert case.script.read_text().strip().splitlines()[-1] in text
        assert "Family " not in report["title"] and "@" not in report["sections"].get("Who can help?", "")
        assert "issues/new" in text and "only drafts" in text


def test_a_users_script_failing_like_a_catalog_case_names_it(tmp_path):
    # the recorded reduction of a PEFT device_map scenario fails as family C does: the draft says so, with the
    # upstream fix, and names neither a docstring it lacks nor the file's stem as its summary
    from dataclasses import replace

    catalog = load_catalog()
    [known] = catalog.select(["gemma4-shared-kv-keyerror"])
    script = RESULTS / "bisect" / "scripts" / "r06_reduction_pinned.py"
    case = replace(known, id=script.stem, script=script, family=USER_SCRIPT, upstream=(), fixed_in=(), patches=())
    report = draft(case, catalog, RESULTS / "scripts" / "r06_reduction_pinned", python=Path("/nonexistent/python"))
    assert "`gemma4-shared-kv-keyerror` (family C)" in report["extra"]["Related"]
    assert "transformers#45312" in report["extra"]["Related"]
    assert report["title"].endswith("`model.generate()` fails")
    assert "r06_reduction_pinned." not in report["sections"]["Expected behavior"]


def test_a_case_recorded_only_alone_is_found_for_its_report(tmp_path):
    # X's CPU case is skipped on CUDA boxes and was recorded only in results/cases/: the draft said "no recorded run"
    import json

    from minrepro.catalog.matrix import recorded_runs_of

    env = {"set": "pinned", "machine": "cpu", "gpu": None, "date": "2026-11-25"}
    whole = {**env, "date": "2026-11-23", "cases": [{"case": "other", "observed": "fail"}]}
    alone = {**env, "cases": [{"case": "x", "observed": "fail", "headline": "RuntimeError: boom"}]}
    (tmp_path / "cases").mkdir()
    (tmp_path / "pinned-cpu.json").write_text(json.dumps(whole))
    (tmp_path / "cases" / "pinned-cpu-family-x.json").write_text(json.dumps(alone))
    runs = recorded_runs_of("x", tmp_path)
    assert list(runs) == [("pinned", "cpu")] and runs[("pinned", "cpu")]["cases"] == alone["cases"]
    assert recorded_runs_of("missing", tmp_path) == {}


def test_the_expected_behavior_is_the_cases_own_words_else_the_line_it_should_reach():
    # the last print's expression read as an expectation gave `Expected: "logits on", model(...).device.`
    from minrepro.reports.report import expected_line

    said = '"""Family Z.\n\nExpected: logits on cpu, as without the adapter.\n"""\nprint("logits on", x)\n'
    assert expected_line(said) == "logits on cpu, as without the adapter"
    assert (
        expected_line('import torch\nprint("logits on", x)\n')
        == 'the script to run to its last line, `print("logits on", x)`'
    )
    assert expected_line("import torch\n") == "the script to exit without an error"


def test_system_info_comes_from_an_env_here_only_on_the_kind_of_machine_the_run_was_recorded_on():
    """A CPU box's `transformers env` printed beside a failure recorded on two GPUs told a maintainer the wrong system
    (five drafts had it); the recorded versions are what such a report shows."""
    import sys

    from minrepro.harness.probe import probe
    from minrepro.reports.report import _same_machine

    here = probe(sys.executable)
    python = Path(sys.executable)
    assert _same_machine(python, {"machine": here.machine, "gpu": here.gpu, "gpus": here.gpus})
    assert not _same_machine(python, {"machine": "cuda", "gpu": "NVIDIA H200", "gpus": 2})


def test_a_users_report_says_what_the_catalogs_patches_did_to_the_script(tmp_path):
    """`check SCRIPT --set S --patched` recorded the script with every catalog patch; the draft's Suggested fix says
    so (and a script without such runs keeps "No fix prototype yet.")."""
    import json

    from minrepro.catalog.manifest import Case
    from minrepro.reports.report import patched_runs

    script = tmp_path / "job.py"
    script.write_text("raise ValueError('x')\n")
    case = Case(
        id="job",
        script=script,
        family=USER_SCRIPT,
        device="cpu",
        signature="",
        outcomes={},
        fixed_in=(),
        upstream=(),
        patches=(),
    )
    assert patched_runs(case, tmp_path / "patched") == ""
    (tmp_path / "patched").mkdir()
    doc = {
        "set": "newest",
        "machine": "cpu",
        "patches": ["a.diff", "b.diff"],
        "cases": [{"case": "job", "observed": "pass", "headline": ""}],
    }
    (tmp_path / "patched" / "newest-cpu.json").write_text(json.dumps(doc))
    assert "- newest (cpu), with the 2 catalog patches that apply there: passes" in patched_runs(
        case, tmp_path / "patched"
    )


def test_a_report_carries_its_repository_s_diff_and_points_at_the_others():
    """V's fix on peft 0.19.1 stacks R's backport and transformers' S under it: the peft report carries V's own diff,
    not R's port to an old release (main has R), and names S's transformers diff instead of pasting it."""
    from minrepro.reports.kit import patch_for
    from minrepro.reports.report import _patches

    [case] = load_catalog().select(["peft-offload-tied-weight"])
    text = _patches(case, "peft")
    assert "keep a tied weight on disk in the rebuilt offload index" in text and "```diff" in text
    assert text.count("```diff") == 1
    assert "- transformers: disk offload index: a tied weight on disk reads its source's checkpoint entry" in text
    assert "update-offload-prefix" not in text
    kit_diffs, test = patch_for(case, "peft")
    assert [d.name for d in kit_diffs] == ["peft-offload-tied-weight.diff"] and test.name.endswith(".test")


def test_on_main_names_a_newer_release_recorded_beside_main_by_its_versions(tmp_path):
    """results/main/ also holds the newest set with transformers 5.24.0 (no refs, no set): the draft said "still fails
    on main (; the None set's other libraries ...)"."""
    import json

    from minrepro.reports.report import on_main

    [case] = load_catalog().select(["peft-offload-tied-weight"])
    (tmp_path / "main").mkdir()
    versions = {
        "torch": "2.13.0+cpu",
        "transformers": "5.24.0",
        "accelerate": "1.15.0",
        "peft": "0.21.2",
        "bitsandbytes": "0.50.2",
        "tokenizers": "0.23.3",
    }
    doc = {
        "set": None,
        "machine": "cpu",
        "date": "2026-11-25",
        "versions": versions,
        "cases": [{"case": case.id, "observed": "fail"}],
    }
    (tmp_path / "main" / "newest-with-transformers-5.24.0-cpu.json").write_text(json.dumps(doc))
    assert on_main(case, tmp_path) == (
        "- still fails with transformers 5.24.0, tokenizers 0.23.3 (the newest set otherwise, cpu, 2026-11-25)"
    )


def test_a_commit_bisection_recorded_beside_the_case_is_in_its_draft():
    # AD's `bisect --git` record named accelerate#4083, and the draft said nothing of it: only release bisections
    # (`<case>.json`) were read, not `<case>-<library>-commits.json`
    catalog = load_catalog()
    [case] = catalog.select(["dispatch-main-device-from-set"])
    versions = draft(case, catalog, RESULTS, python=Path("/nonexistent/python"))["extra"]["Versions"]
    assert "Bisection over accelerate's first-parent commits a5cb37c1..16cb6eb8" in versions
    assert 'first broke at 2f87576d329d "[Offloading] Support full disk offloading (#4083)" (PR #4083)' in versions
