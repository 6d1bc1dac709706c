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
