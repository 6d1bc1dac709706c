"""The seed-scenario tables: verdicts come from the recorded rows and the seeds' expectations, a patched env is
expected to pass, and reductions are compared with their family's catalog case by code lines."""

from __future__ import annotations

import json

import pytest

from minrepro import scenario_matrix
from minrepro.catalog import load_catalog
from reducers.scenario import SEED_REPORTS, presets


def _row(preset, outcome="fail", headline="", scale="e2b"):
    return {"preset": preset, "scale": scale, "device": "cuda", "outcome": outcome, "headline": headline,
            "owner": "", "seconds": 1.0}


@pytest.mark.parametrize(("preset", "set_name", "scale", "headline", "verdict"), [
    ("r06-peft-device-map", "pinned", "e2b", "KeyError: 13", "as expected"),
    ("r06-peft-device-map", "pinned", "e4b", "KeyError: 13", "differs"),   # the seeds saw 22 on E4B
    ("r06-peft-device-map", "pinned", "tiny", "KeyError: 0", "as expected"),
    ("r06-peft-device-map", "newest", "e2b", "KeyError: 13", "differs"),   # fixed in transformers 5.23
    ("dequantize-merge", "newest", "e2b", "AttributeError: 'Parameter' object has no attribute 'quant_state'",
     "as expected"),
    ("broad-targets", "pinned", "e2b", "ValueError: Target module Gemma4ClippableLinear(", "as expected"),
])
def test_verdicts_follow_the_seeds(preset, set_name, scale, headline, verdict):
    doc = {"scenario_set": set_name}
    row = _row(preset, headline=headline, scale=scale)
    assert scenario_matrix.verdict(scenario_matrix.expectation(doc, row), row) == verdict


def test_a_patched_env_is_expected_to_pass():
    row = _row("merge-parity", headline="AssertionError: merge into 4-bit diverges from the adapter output")
    assert scenario_matrix.expectation({"scenario_set": "pinned", "patches": ["peft/x.diff"]}, row) == "pass"
    assert scenario_matrix.verdict("pass", row) == "differs"
    assert scenario_matrix.verdict("pass", _row("merge-parity", outcome="pass")) == "as expected"


def test_every_preset_has_a_seed_report():
    assert set(SEED_REPORTS) == set(presets("cuda")) == set(presets("cpu"))


def test_reductions_are_compared_with_their_catalog_case(tmp_path):
    reductions = tmp_path / "reductions"
    steps = reductions / "r06-peft-device-map-e2b-cuda-pinned.steps"
    steps.mkdir(parents=True)
    (steps / "00-preset.py").write_text("import os\nimport sys\nx = 1\ny = 2\n")
    (steps / "00-preset.json").write_text("{}")
    (steps / "01-jump_to_tiny.py").write_text("import os\nx = 1\ny = 2\n")
    (steps / "01-jump_to_tiny.json").write_text("{}")
    (reductions / "r06-peft-device-map-e2b-cuda-pinned.min.py").write_text("# reduced\nx = 1\n")
    (reductions / "notes.txt").write_text("not a reduction")
    (tmp_path / "pinned-e2b-cuda.json").write_text(json.dumps(
        {"scenario_set": "pinned", "gpu": "NVIDIA H100", "rows": [_row("r06-peft-device-map", headline="KeyError: 13")]}))
    catalog = load_catalog(None)
    [row] = scenario_matrix.reduction_rows(reductions, catalog)
    assert (row["preset_lines"], row["spec_lines"], row["spec_steps"], row["final"]) == (4, 3, 1, 1)
    assert row["case"] == "gemma4-shared-kv-keyerror" and row["case_lines"] > 1
    text = scenario_matrix.render(tmp_path, catalog)
    assert "| r06-peft-device-map | C | pinned | e2b, H100 |" in text and "| reduction |" in text


def test_readme_block_is_replaced(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{scenario_matrix.BEGIN}\nold\n{scenario_matrix.END}\noutro\n")
    scenario_matrix.write_readme(tmp_path, load_catalog(None), readme)
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro") and text.endswith("outro\n")
