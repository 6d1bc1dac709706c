"""Scenario specs: every preset renders to valid Python at every scale, specs round-trip through JSON,
structured passes only simplify, and a toy's failure counts as the original's only when it is its tail."""

from __future__ import annotations

import ast

import pytest

from minrepro.harness.signature import Frame, Signature
from minrepro.scenarios.passes import SCENARIO_PASSES
from minrepro.scenarios.presets import BUDGET_PREFIX, presets
from minrepro.scenarios.render import checkpoint_key, render, render_build
from minrepro.scenarios.spec import MachineSpec, Scenario, scaled


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("scale", ["tiny", "e2b", "e4b"])
def test_presets_render_to_python(device, scale):
    for name, spec in presets(device, scale).items():
        source = render(spec)
        ast.parse(source)
        assert source.startswith("# /// script"), name
        assert BUDGET_PREFIX not in source, name  # named budgets become explicit max_memory dicts


@pytest.mark.parametrize("scale", ["tiny", "e4b"])
def test_spec_json_round_trip(scale):
    for spec in presets("cuda", scale).values():
        assert Scenario.from_json(spec.to_json()) == spec


def test_budgets_follow_the_scale_and_never_collide_on_cpu():
    # the old CPU presets wrote {"cpu": budget, "cpu": "100GiB"}: the second key silently replaced the first
    tiny = render(presets("cuda", "tiny")["r03-peft-spill"])
    e4b = render(presets("cuda", "e4b")["r03-peft-spill"])
    assert "max_memory={0: '1MB', 'cpu': '3MB'}" in tiny and "max_memory={0: '1GiB', 'cpu': '8GiB'}" in e4b
    assert "max_memory={'cpu': '3MB'}" in render(presets("cpu", "tiny")["r03-peft-spill"])


def test_machine_profile_is_rendered_before_the_base_load():
    spec = presets("cuda", "e4b")["r03-box-16g-gpu-16g-ram"]
    assert spec.machine == MachineSpec(16.0, 16.0)
    source = render(spec)
    assert (
        source.index("ballast = torch.empty")
        < source.index("psutil.virtual_memory =")
        < source.index("from_pretrained(root")
    )
    assert "r03-box-16g-gpu" not in presets("cuda", "tiny") and "r03-box-16g-gpu" not in presets("cpu", "e4b")


def _size(spec: Scenario) -> tuple:
    text = spec.model.text
    return (
        spec.model.kind != "gemma4",
        len(spec.model.towers),
        text["layer_repeat"] * len(text["layer_types"]),
        text["hidden_size"],
        text["vocab_size"],
    )


def test_passes_propose_different_and_never_larger_models():
    for spec in presets("cuda", "e2b").values():
        for scenario_pass in SCENARIO_PASSES:
            for candidate in scenario_pass(spec):
                assert candidate != spec, scenario_pass.__name__
                big, small = _size(spec), _size(candidate)
                assert small[0] or all(s <= b for s, b in zip(small[1:], big[1:], strict=False)), scenario_pass.__name__
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
    for spec in presets(device).values():
        assert render_build(spec) is None  # tiny: the run builds it itself
    for spec in presets(device, "e2b").values():
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
    from minrepro.scenarios import table

    monkeypatch.setattr(table, "run_rendered", lambda *a, **k: pytest.fail("ran a measured preset"))
    monkeypatch.setattr(table, "prebuild", lambda *a, **k: pytest.fail("built a measured preset"))
    measured = [
        {
            "preset": "r05-all-gpu",
            "scale": "tiny",
            "device": "cpu",
            "outcome": "pass",
            "headline": "",
            "owner": "",
            "seconds": 1.0,
        }
    ]
    seen = []
    rows = table.scenario_table(
        table.PresetsAt(["r05-all-gpu"], "tiny", "cpu"), table.PresetEnv("python3", 10), seen.append, measured
    )
    assert rows == measured and not seen
