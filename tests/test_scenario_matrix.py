"""The seed-scenario tables: verdicts come from the recorded rows and the seeds' expectations, a patched env is
expected to pass, and reductions are compared with their family's catalog case by code lines."""

from __future__ import annotations

import json

import pytest

from minrepro.catalog.manifest import load_catalog
from minrepro.scenarios import matrix as scenario_matrix
from minrepro.scenarios.presets import SEED_REPORTS, presets
from minrepro.scenarios.reduce import ScenarioTrip, write_steps


def _row(preset, outcome="fail", headline="", scale="e2b"):
    return {
        "preset": preset,
        "scale": scale,
        "device": "cuda",
        "outcome": outcome,
        "headline": headline,
        "owner": "",
        "seconds": 1.0,
    }


@pytest.mark.parametrize(
    ("preset", "set_name", "scale", "headline", "verdict"),
    [
        ("r06-peft-device-map", "pinned", "e2b", "KeyError: 13", "as expected"),
        ("r06-peft-device-map", "pinned", "e4b", "KeyError: 13", "differs"),  # the seeds saw 22 on E4B
        ("r06-peft-device-map", "pinned", "tiny", "KeyError: 0", "as expected"),
        ("r06-peft-device-map", "newest", "e2b", "KeyError: 13", "differs"),  # fixed in transformers 5.23
        (
            "dequantize-merge",
            "newest",
            "e2b",
            "AttributeError: 'Parameter' object has no attribute 'quant_state'",
            "as expected",
        ),
        ("broad-targets", "pinned", "e2b", "ValueError: Target module Gemma4ClippableLinear(", "as expected"),
    ],
)
def test_verdicts_follow_the_seeds(preset, set_name, scale, headline, verdict):
    doc = {"scenario_set": set_name}
    row = _row(preset, headline=headline, scale=scale)
    assert scenario_matrix.verdict(scenario_matrix.expectation(doc, row)[0], row) == verdict


def _traced(preset, headline, quantized, status="started"):
    row = _row(preset, outcome="fail" if headline else "pass", headline=headline)
    call = {
        "event": "dispatch_model",
        "caller": "peft.peft_model:load_adapter",
        "status": status,
        "devices": {"0": 3, "cpu": 2, "disk": 4},
        "main_device": "0",
        "offloaded_quantized_weights": quantized,
    }
    return {**row, "placement": [call], "reached": quantized > 0}


def test_the_seeds_failure_is_expected_only_where_its_branch_is_reached():
    doc = {"scenario_set": "pinned"}
    b = "TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'"
    reached = _traced("r03-peft-spill", b, 12)
    assert scenario_matrix.expectation(doc, reached)[0].startswith("Params4bit")
    assert scenario_matrix.verdict(scenario_matrix.expectation(doc, reached)[0], reached) == "as expected"
    roomy = _traced("r03-split", "", 0, status="returned")  # all on the GPU: the branch is not there to fail
    expected, why = scenario_matrix.expectation(doc, roomy)
    assert expected == "pass" and "not reached" in why
    untraced = _row("r03-split", outcome="pass")  # recorded before the trace: which branch is unknown
    assert scenario_matrix.expectation(doc, untraced)[0] is None


def test_a_patched_env_is_expected_to_pass():
    row = _row("merge-parity", headline="AssertionError: merge into 4-bit diverges from the adapter output")
    assert scenario_matrix.expectation({"scenario_set": "pinned", "patches": ["peft/x.diff"]}, row)[0] == "pass"
    assert scenario_matrix.verdict("pass", row) == "differs"
    assert scenario_matrix.verdict("pass", _row("merge-parity", outcome="pass")) == "as expected"


def test_every_preset_has_a_seed_report():
    names = set(presets("cuda")) | set(presets("cpu")) | set(presets("cuda", "e4b"))
    assert set(SEED_REPORTS) == names


def test_reductions_are_compared_with_their_catalog_case(tmp_path):
    reductions = tmp_path / "reductions"
    reductions.mkdir()
    spec = presets("cuda", "e2b")["r06-peft-device-map"]
    tiny = presets("cuda", "tiny")["r06-peft-device-map"]
    trip = ScenarioTrip([("preset", spec, "KeyError: 13"), ("jump_to_tiny", tiny, "KeyError: 0")], runs=2)
    write_steps(
        reductions / "r06-peft-device-map-e2b-cuda-pinned.steps.json", trip, "r06-peft-device-map", "e2b", "cuda"
    )
    (reductions / "r06-peft-device-map-e2b-cuda-pinned.min.py").write_text("# reduced\nx = 1\n")
    (reductions / "notes.txt").write_text("not a reduction")
    (tmp_path / "pinned-e2b-cuda.json").write_text(
        json.dumps(
            {
                "scenario_set": "pinned",
                "gpu": "NVIDIA H100",
                "rows": [_row("r06-peft-device-map", headline="KeyError: 13")],
            }
        )
    )
    catalog = load_catalog(None)
    [row] = scenario_matrix.reduction_rows(reductions, catalog)
    from minrepro.reducers.source import code_lines
    from minrepro.scenarios.render import render

    assert (row["preset_lines"], row["spec_lines"], row["spec_steps"], row["final"]) == (
        code_lines(render(spec)),
        code_lines(render(tiny)),
        1,
        1,
    )
    assert row["case"] == "gemma4-shared-kv-keyerror" and row["case_lines"] > 1
    text = scenario_matrix.render(tmp_path, catalog)
    assert "| r06-peft-device-map | C | pinned | e2b, H100 |" in text and "| reduction |" in text


def test_readme_block_is_replaced(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{scenario_matrix.BEGIN}\nold\n{scenario_matrix.END}\noutro\n")
    scenario_matrix.write_readme(tmp_path, load_catalog(None), readme)
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro") and text.endswith("outro\n")


def test_a_spec_reduction_stops_its_spec_passes_at_the_time_budget_and_hands_the_rest_to_the_script(
    tmp_path, monkeypatch
):
    """`--reduce-seconds` (explore) and `--max-seconds` bound the whole trip: past their share of the budget no more
    spec candidates run, and the script phase gets what is left, not the whole budget again. A proposed spec that
    no script can stand for (render refuses it) is skipped, not the end of the reduction."""
    from types import SimpleNamespace

    from minrepro.harness.signature import Signature
    from minrepro.reduction.options import ReduceOptions
    from minrepro.scenarios import reduce as trip

    clock = [0.0]
    sig = Signature("exception", "ValueError", "boom")
    judged: list[int] = []

    def run(source, directory, python, timeout):
        clock[0] += 10.0  # each run costs ten seconds
        judged.append(1)
        return SimpleNamespace(signature=sig, raw_headline="ValueError: boom", modules=())

    handed: list[float | None] = []
    monkeypatch.setattr(trip, "time", SimpleNamespace(monotonic=lambda: clock[0]))  # this module's clock only
    monkeypatch.setattr(trip, "probe", lambda python: SimpleNamespace(versions={}))
    monkeypatch.setattr(trip, "read_marker", lambda env: None)
    monkeypatch.setattr(trip, "use_checkpoint_cache", lambda namespace: None)
    monkeypatch.setattr(trip, "prebuild", lambda *a: 0.0)
    monkeypatch.setattr(trip, "run_rendered", run)

    def render(spec):
        if spec < 0:
            raise ValueError(
                "the placement check compares loads of the saved adapter: it needs PeftModel.from_pretrained"
            )
        return f"# {spec}\n"

    monkeypatch.setattr(trip, "render", render)
    monkeypatch.setattr(trip, "SCENARIO_PASSES", [lambda spec: [-1, spec + 1]])  # one smaller spec, which fails
    monkeypatch.setattr(trip, "reduce_script", lambda opts, log: handed.append(opts.max_seconds) or "done")
    opts = ReduceOptions(
        script=tmp_path / "-",
        out=tmp_path / "x.min.py",
        python="python",
        jobs=1,
        timeout=60,
        workdir=tmp_path / "w",
        executor="cold",
        max_seconds=35.0,
    )
    logged: list[str] = []
    steps, summary = trip.reduce_spec(
        0, trip.ScenarioTarget("x", "tiny", "cpu"), opts, keep_steps=False, log=logged.append
    )
    assert summary == "done" and len(judged) == 2  # the original (10 s), one spec (20 s): past half of 35 s
    assert handed == [15.0]  # what the spec passes left of the 35 s
    assert any("stopped at their share of the time budget" in line for line in logged)
    assert [name for name, _, _ in steps.steps] == ["preset", "<lambda>"]
