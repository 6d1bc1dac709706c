"""Scenario specs: every preset renders to valid Python at every scale, specs round-trip through JSON,
structured passes only simplify, and a toy's failure counts as the original's only when it is its tail."""

from __future__ import annotations

import ast

import pytest

from minrepro.signature import Frame, Signature
from reducers.scenario import Scenario, presets, render, scaled
from reducers.scenario_passes import SCENARIO_PASSES


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("scale", ["tiny", "e2b", "e4b"])
def test_presets_render_to_python(device, scale):
    for name, spec in presets(device).items():
        source = render(scaled(spec, scale))
        ast.parse(source)
        assert source.startswith("# /// script"), name


def test_spec_json_round_trip():
    for spec in presets("cuda").values():
        assert Scenario.from_json(spec.to_json()) == spec


def _size(spec: Scenario) -> tuple:
    text = spec.model.text
    return (spec.model.kind != "gemma4", len(spec.model.towers), text["layer_repeat"] * len(text["layer_types"]),
            text["hidden_size"], text["vocab_size"])


def test_passes_propose_different_and_never_larger_models():
    for spec in presets("cuda").values():
        spec = scaled(spec, "e2b")
        for scenario_pass in SCENARIO_PASSES:
            for candidate in scenario_pass(spec):
                assert candidate != spec, scenario_pass.__name__
                big, small = _size(spec), _size(candidate)
                assert small[0] or all(s <= b for s, b in zip(small[1:], big[1:])), scenario_pass.__name__
                ast.parse(render(candidate))


def test_tail_of_means_entered_lower_down():
    frames = tuple(Frame("peft", f"peft.m{i}", f"f{i}") for i in range(4))
    original = Signature("exception", "RuntimeError", "boom", frames)
    assert Signature("exception", "RuntimeError", "boom", frames[2:]).is_tail_of(original)
    assert not Signature("exception", "RuntimeError", "boom", frames[:2]).is_tail_of(original)
    assert not Signature("exception", "RuntimeError", "bang", frames[2:]).is_tail_of(original)
    assert not Signature("exception", "RuntimeError", "boom", ()).is_tail_of(original)
    own = Signature("exception", "AssertionError", "diverges", ())  # raised by the script itself
    assert Signature("exception", "AssertionError", "diverges", ()).is_tail_of(own)
    assert not Signature("exception", "AssertionError", "diverges", frames[3:]).is_tail_of(own)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_build_script_is_the_renderings_prefix_and_names_its_cache_entry(device):
    from reducers.scenario import checkpoint_key, render_build

    for spec in presets(device).values():
        assert render_build(spec) is None  # tiny: the run builds it itself
        spec = scaled(spec, "e2b")
        build, full = render_build(spec), render(spec)
        ast.parse(build)
        assert full.startswith(build) and len(full) > len(build)
        assert repr(checkpoint_key(spec)) in build
    toy = Scenario("toy", model=presets(device)["r06-peft-device-map"].model.__class__(kind="shared_kv"))
    assert render_build(scaled(toy, "e2b")) is None


def test_cpu_split_names_two_devices():
    # a single-device map records no hf_device_map, so PEFT would never redispatch (r06 passed at tiny for that)
    for name, spec in presets("cpu").items():
        device_map = spec.placement.device_map
        if name.startswith(("r03", "r06")):
            assert isinstance(device_map, dict) and len(set(device_map.values())) > 1, name


def test_a_table_resumes_from_rows_already_measured(monkeypatch):
    from minrepro import scenario_reduction

    monkeypatch.setattr(scenario_reduction, "run_rendered", lambda *a, **k: pytest.fail("ran a measured preset"))
    monkeypatch.setattr(scenario_reduction, "prebuild", lambda *a, **k: pytest.fail("built a measured preset"))
    measured = [{"preset": "r05-all-gpu", "scale": "tiny", "device": "cpu", "outcome": "pass", "headline": "",
                 "owner": "", "seconds": 1.0}]
    seen = []
    rows = scenario_reduction.scenario_table(["r05-all-gpu"], "tiny", "cpu", "python3", 10, seen.append, measured)
    assert rows == measured and not seen
