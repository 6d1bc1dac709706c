"""`minrepro explore`: the strategies draw specs that render and round-trip, the oracles and the catalog
classification name what a run ended with, and the search keeps to its budget and resumes from its cache. The
runner is replaced by a fake library here (a failure that depends on the spec's placement); the recorded runs
on real environments are under results/explore/."""

from __future__ import annotations

import json
import types
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minrepro.catalog.manifest import load_catalog
from minrepro.harness.runner import RunResult
from minrepro.harness.signature import Frame, Signature
from minrepro.scenarios import explore as ex
from minrepro.scenarios.render import render
from minrepro.scenarios.spec import Scenario
from minrepro.scenarios.strategies import scenarios


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([("cpu", 1), ("cuda", 1), ("cuda", 2)]).flatmap(lambda d: scenarios(d[0], "tiny", d[1])))
def test_drawn_specs_render_and_round_trip(spec: Scenario) -> None:
    assert Scenario.from_json(spec.to_json()) == spec
    source = render(spec)
    compile(source, "<spec>", "exec")
    if spec.quant is None:
        assert spec.action != "dequantize_merge"  # refused by design, not a finding
    if spec.action == "placement":
        assert spec.peft.call == "from_pretrained"  # the reference loads the saved adapter


@settings(max_examples=30, deadline=None)
@given(scenarios("cpu", "tiny"))
def test_cpu_specs_never_name_a_gpu(spec: Scenario) -> None:
    text = json.dumps([spec.placement.device_map, spec.placement.max_memory, spec.peft.kwargs])
    assert not spec.uses_gpu and '"0"' not in text and ": 0" not in text


WITNESSES = json.loads((Path(__file__).parent / "data" / "explore_witnesses.json").read_text())


def _witness(name: str, **changes) -> Scenario:
    return Scenario.from_json(json.dumps({**WITNESSES[name]["spec"], **changes}))


def test_inputs_go_where_a_one_device_map_puts_the_model():
    # `{"": 1}` makes no dispatch, so no hook moves the inputs: ids rendered on cuda:0 made the two-GPU newest
    # exploration report an index_select device mismatch that was the harness's own
    spec = _witness("one_device_map_forward")
    assert spec.placement.device_map == {"": 1}
    assert "ids = torch.tensor([[2, 3, 4, 5]], device=1)" in render(spec)
    split = _witness(
        "one_device_map_forward",
        placement={**WITNESSES["one_device_map_forward"]["spec"]["placement"], "device_map": {"": 1, "lm_head": 0}},
    )
    assert "device=0)" in render(split)  # a split: accelerate's top-level hook moves them from cuda:0


def test_placement_reference_and_load_each_get_their_inputs():
    # the re-run after that fix made the ids of a placement check cuda:1 before the reference, which is on cuda:0
    spec = _witness("one_device_map_placement")
    assert spec.placement.device_map == {"": 1} and spec.action == "placement"
    lines = render(spec).splitlines()
    at = {line: i for i, line in enumerate(lines)}
    first = at["ids = torch.tensor([[2, 3, 4, 5]], device=0)"]
    assert first < min(i for line, i in at.items() if line.startswith("reference = ")) < at["ids = ids.to(1)"]
    assert at["ids = ids.to(1)"] > min(i for line, i in at.items() if line.startswith("base = "))


@pytest.mark.parametrize("action", ["forward", "placement"])
def test_inputs_follow_an_auto_load_that_fits_one_device(action: str):
    # "auto" with max_memory {0: 1MB, 1: 1GiB} puts the whole model on cuda:1 with no hooks: the two-GPU newest
    # re-run reported ids on cuda:0 against it (4 runs), which a user who looked at the load would not write
    peft = {"call": "from_pretrained", "kwargs": {}}
    spec = _witness(
        "one_device_map_forward",
        action=action,
        peft=peft,
        placement={"device_map": "auto", "offload_folder": True, "max_memory": {"cpu": "1MB", "1": "1GiB", "0": "1MB"}},
    )
    source = render(spec)
    compile(source, "<spec>", "exec")
    lines = source.splitlines()
    moved = [i for i, line in enumerate(lines) if "next(iter(placed)) if len(placed) == 1" in line]
    assert moved and moved[0] > next(i for i, line in enumerate(lines) if line.startswith("base = "))


@pytest.mark.parametrize(
    "placed, cuda, expected",
    [
        ({"cpu"}, False, "cpu"),
        ({1}, True, 1),
        ({"cpu", "disk"}, False, "cpu"),
        ({0, "disk"}, True, "cuda"),
        ({"disk"}, False, "cpu"),
        ({"disk"}, True, "cuda"),
    ],
)
def test_inputs_of_an_auto_load_go_to_a_device(placed: set, cuda: bool, expected):
    # a CPU exploration's dequantize witness had "auto" put everything on disk, and its replay died on
    # `torch.tensor(..., device='disk')` before reaching the libraries
    spec = _witness(
        "one_device_map_forward", placement={"device_map": "auto", "offload_folder": True, "max_memory": {"cpu": "1MB"}}
    )
    line = next(line for line in render(spec).splitlines() if line.startswith("ids = torch.tensor("))
    device_expression = line.split("device=", 1)[1].rsplit(")", 1)[0]
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: cuda))
    assert eval(device_expression, {"placed": placed, "torch": torch}) == expected


def _sig(type_: str, message: str, raised_by: str = "library", frames: tuple[Frame, ...] = ()) -> Signature:
    return Signature("exception", type_, message, frames, (), raised_by)


B_OWNER = Frame("accelerate", "accelerate.utils.modeling", "set_module_tensor_to_device")


@pytest.mark.parametrize(
    "sig, headline, oracle",
    [
        (None, "pass", None),
        (
            _sig("AssertionError", "placement changes the logits: relative error <num>", "script"),
            "AssertionError: placement changes the logits: relative error 0.300",
            "placement",
        ),
        (
            _sig("AssertionError", "logits on cpu, input on cuda", "script"),
            "AssertionError: logits on cpu, input on cuda",
            "placement",
        ),
        (
            _sig("AssertionError", "loading rewrote the checkpoint", "script"),
            "AssertionError: loading rewrote the checkpoint",
            None,
        ),
        (
            _sig("AssertionError", "x", "script"),
            "AssertionError: PeftModel.from_pretrained rewrote the base checkpoint",
            "files",
        ),
        (_sig("KeyError", "'a'", frames=(B_OWNER,)), "KeyError: 'a'", "library error"),
        (Signature("timeout", "Timeout", "no exit after <num> s"), "Timeout", "crash"),
        (_sig("ValueError", "bad value", "script"), "ValueError: bad value", None),
    ],
)
def test_oracle_of(sig, headline, oracle) -> None:
    assert ex.oracle_of(sig, headline) == oracle


def test_known_case_needs_regex_and_owner() -> None:
    catalog = load_catalog()
    headline = "TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'"
    via_peft = (Frame("peft", "peft.peft_model", "PeftModel.load_adapter"), B_OWNER)
    assert ex.known_case(_sig("TypeError", "...", frames=via_peft), headline, catalog) == "params4bit-hf-initialized"
    elsewhere = (Frame("peft", "peft.peft_model", "PeftModel.load_adapter"),)
    assert ex.known_case(_sig("TypeError", "...", frames=elsewhere), headline, catalog) is None


def test_reduction_order_puts_oracles_and_non_valueerrors_first() -> None:
    def run(sig: Signature, oracle: str) -> ex.Run:
        return ex.Run({}, sig.message, oracle, sig.headline, sig.to_dict(), None, 1.0, {}, 0, {})

    refused = ("v", [run(_sig("ValueError", "refused"), "library error")] * 5)
    crash = ("k", [run(_sig("KeyError", "'x'"), "library error")])
    parity = ("p", [run(_sig("AssertionError", "placement changes", "script"), "placement")])
    ordered = sorted([refused, crash, parity], key=lambda item: ex.reduction_order(*item))
    assert [key for key, _ in ordered] == ["p", "k", "v"]


def _fake_library(spec: Scenario) -> RunResult:
    """A library whose PEFT redispatch fails when given a budget, and whose merge drifts for fp4."""
    if "max_memory" in spec.peft.kwargs:
        frames = (Frame("peft", "peft.peft_model", "PeftModel.load_adapter"), B_OWNER)
        sig = _sig(
            "TypeError", "Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'", frames=frames
        )
        trace = (
            {
                "event": "dispatch_model",
                "status": "started",
                "caller": "peft.peft_model",
                "devices": {"cpu": 3, "disk": 2},
                "offloaded_quantized_weights": 4,
            },
        )
        return RunResult(1, "", "", 0.01, sig, sig.headline, trace)
    if spec.peft.call == "get_peft_model" and spec.action == "merge":
        sig = _sig("RuntimeError", "made up", frames=(Frame("peft", "peft.tuners.lora", "merge"),))
        return RunResult(1, "", "", 0.01, sig, sig.headline)
    return RunResult(0, "relative error 0.001000", "", 0.01, None, "")


def test_explore_classifies_keeps_budget_and_resumes(tmp_path: Path, monkeypatch) -> None:
    calls: list[str] = []

    def fake_run(source, directory, python, timeout, env=None):
        calls.append(source)
        return _fake_library(_specs[source])

    _specs: dict[str, Scenario] = {}
    real_render = ex.render

    def remember(spec: Scenario) -> str:
        source = real_render(spec)
        _specs[source] = spec
        return source

    monkeypatch.setattr(ex, "render", remember)
    monkeypatch.setattr(ex, "run_rendered", fake_run)
    monkeypatch.setattr(ex, "prebuild", lambda *a, **k: 0.0)
    opts = ex.ExploreOptions(python="python", seconds=3.0, jobs=2, max_examples=40, workdir=tmp_path)
    state = ex.explore(opts, load_catalog(), lambda _: None)
    assert state.calibration["tolerance"] == ex.TOLERANCE_FLOOR  # controls at 0.001: the floor holds
    groups = state.groups()
    assert "params4bit-hf-initialized" in groups  # the budget failure, by the catalog's regex and owner
    assert all(r.offloaded_quantized == 4 for r in groups["params4bit-hf-initialized"])
    first = len(calls)
    searched = json.loads((tmp_path / "elapsed.json").read_text())["seconds"]
    again = ex.explore(replace(opts, seconds=3.0), load_catalog(), lambda _: None)
    # the second run replays hypothesis' draws from the run cache: earlier runs are reported, not run again
    assert {r.digest for r in state.runs} <= {r.digest for r in again.runs}
    assert len(set(calls[first:]) & set(calls[:first])) == 0
    doc = ex.report_doc(again, opts, {"torch": "x"}, {})
    assert doc["runs"] == len(again.runs) and "| library error |" in ex.report_markdown(doc)
    assert again.earlier == searched > 0 and again.elapsed() >= searched  # a resume counts the first run's time


def test_gpu_env_rotates_visible_devices() -> None:
    assert ex.gpu_env(0, 1) is None
    assert [ex.gpu_env(i, 2)["CUDA_VISIBLE_DEVICES"] for i in range(3)] == ["0,1", "1,0", "0,1"]


def test_readme_explore_table_is_generated_from_the_recorded_runs() -> None:
    from minrepro.catalog.matrix import replace_block

    root = Path(__file__).resolve().parents[1]
    readme = root / "docs" / "explore.md"
    text = readme.read_text(encoding="utf-8")
    fresh = replace_block(readme, text, ex.summary(root / "results" / "explore", load_catalog()), ex.BEGIN, ex.END)
    assert fresh == text, "run `minrepro explore --readme docs/explore.md`"


def test_readme_table_names_a_family_catalogued_after_the_run(tmp_path: Path) -> None:
    """A group recorded as new is shown with the case that matches it today (marked *), by the catalog's own
    rule (regex and owner), and stays new when the owner differs."""
    frames = [
        Frame("accelerate", "accelerate.hooks", "AlignDevicesHook.init_hook"),
        Frame("accelerate", "accelerate.utils.modeling", "set_module_tensor_to_device"),
    ]
    headline = "ValueError: weight is on the meta device, we need a `value` to put in on cpu."
    sig = Signature(
        "exception",
        "ValueError",
        "weight is on the meta device, we need a `value` to put in on cpu.",
        tuple(frames),
        raised_by="library",
    )
    other = replace(sig, frames=(Frame("peft", "peft.peft_model", "PeftModel.from_pretrained"),))
    groups = [
        {
            "key": str(i),
            "known": None,
            "oracle": "library error",
            "count": 1,
            "headline": headline,
            "witness": {"signature": s.to_dict()},
            "reduction": None,
        }
        for i, s in enumerate([sig, other])
    ]
    doc = {
        "device": "cpu",
        "scale": "tiny",
        "gpus": 1,
        "set": "pinned",
        "runs": 2,
        "passing": 0,
        "reached_offloaded_quantized": 0,
        "groups": groups,
    }
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "report.json").write_text(json.dumps(doc), encoding="utf-8")
    rows = [line for line in ex.summary(tmp_path, load_catalog()).splitlines() if "meta device" in line]
    assert "O (root-entry-disk-offload) *" in rows[0] and "**new**" in rows[1]


def test_a_patched_exploration_says_which_families_were_left_unpatched() -> None:
    catalog = load_catalog()
    every = {p for c in catalog.cases for p in c.patches}
    a_patches = set(next(c for c in catalog.cases if c.id == "quant-state-meta-item").patches)
    rels = [f"{p}.diff" for p in sorted(every - a_patches)]
    note = ex.unpatched_note({"patches": rels}, catalog)
    left = note.split("left unpatched: ")[1].rstrip(")").split(", ")
    assert "A" in left and "D" not in left
    assert ex.unpatched_note({"patches": []}, catalog) == ""


def test_a_family_fixed_in_the_explored_set_is_not_left_unpatched() -> None:
    catalog = load_catalog()
    fixed_on_newest = next(c for c in catalog.cases if c.declared("newest") == "pass" and c.patches)
    others = {p for c in catalog.cases for p in c.patches} - set(fixed_on_newest.patches)
    rels = [f"{p}.diff" for p in sorted(others)]
    on = {s: ex.unpatched_note({"patches": rels, "set": s}, catalog) for s in ("pinned", "newest")}
    left = {s: note.split("left unpatched: ")[1].rstrip(")").split(", ") for s, note in on.items()}
    assert fixed_on_newest.family in left["pinned"] and fixed_on_newest.family not in left["newest"]


def test_the_space_holds_a_users_own_dispatch_of_a_quantized_model_on_cpu() -> None:
    """A CPU box quantizes only a whole-cpu load, and PEFT redispatches only maps: the disk-spill branch (A, B) is
    reached there through the user's own dispatch_model of the wrapped model, which the strategies draw."""
    from hypothesis import find

    spec = find(
        scenarios("cpu", "tiny"),
        lambda s: (
            s.peft.call == "dispatch_model"
            and "max_memory" in s.peft.kwargs
            and s.quant is not None
            and s.quant.load_in_4bit
            and s.placement.device_map == "cpu"
        ),
    )
    source = render(spec)
    assert "dispatch_model(model, device_map=infer_auto_device_map(model, max_memory=" in source
    assert "from accelerate import dispatch_model, infer_auto_device_map" in source
    mapped = find(scenarios("cpu", "tiny"), lambda s: s.peft.call == "dispatch_model" and "device_map" in s.peft.kwargs)
    assert all(k == "" or k.startswith("base_model.model.") for k in mapped.peft.kwargs["device_map"])


def test_the_reached_count_takes_the_scripts_own_dispatch_when_peft_made_none() -> None:
    from minrepro.scenarios.table import adapter_dispatch

    base = {"event": "dispatch_model", "caller": "transformers.modeling_utils:from_pretrained", "status": "returned"}
    own = {
        "event": "dispatch_model",
        "caller": "__main__:<module>",
        "status": "started",
        "offloaded_quantized_weights": 3,
    }
    peft = {**own, "caller": "peft.peft_model:load_adapter"}
    assert adapter_dispatch([base, own]) is own and adapter_dispatch([base, peft]) is peft
    assert adapter_dispatch([base]) is None


def test_reduce_only_reduces_a_recorded_reports_new_findings_in_order(tmp_path: Path, monkeypatch) -> None:
    """No search: the new, unreduced groups of a recorded report, most important first, in an env like its own; the
    report is rewritten with each reduction; an env of another set or other patches is refused in one line."""
    import argparse
    import dataclasses
    import shutil

    import pytest

    from minrepro.cli import explore as cli
    from minrepro.errors import MinreproError

    recorded = Path(__file__).resolve().parents[1] / "results" / "explore" / "cpu-tiny-pinned-unmasked-dispatch"
    shutil.copytree(recorded, tmp_path / "r")
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    reduced: list[str] = []
    monkeypatch.setattr(
        cli,
        "_reduce_finding",
        lambda key, witness, *a: reduced.append(key) or {"script": f"{len(reduced)}.min.py", "lines": 9},
    )
    args = argparse.Namespace(
        results=str(tmp_path / "r"), workdir=str(tmp_path / "w"), jobs=1, timeout=60, reduce=2, reduce_seconds=None
    )
    # the catalog as it stood before this report's last findings were catalogued (X, Y), so that some are still new
    catalog = load_catalog()
    catalog = dataclasses.replace(catalog, cases=tuple(c for c in catalog.cases if c.family not in ("X", "Y")))
    with pytest.raises(MinreproError, match="give --python an env like the report's"):
        cli._reduce_recorded(args, cli.ExploredEnv("python", doc["set"], doc["patches"][1:], {}), catalog)
    assert cli._reduce_recorded(args, cli.ExploredEnv("python", doc["set"], doc["patches"], {}), catalog) == 0
    new = [
        g
        for g in doc["groups"]
        if not g["known"] and not ex.known_now(g, catalog) and not (g.get("reduction") or {}).get("script")
    ]
    assert "KeyError: 'lm_head.weight'" not in [g["headline"] for g in new]  # family S, catalogued since
    order = sorted(new, key=lambda g: ex.reduction_order(g["key"], [ex.Run(**g["witness"])] * g["count"]))
    assert order and reduced == [g["key"] for g in order[:2]]  # as many as are still new (findings get catalogued)
    after = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [g["reduction"]["lines"] for g in after["groups"] if g["key"] in reduced] == [9] * len(reduced)
    assert "1.min.py" in (tmp_path / "r" / "report.md").read_text()


def test_the_readme_says_why_a_finding_has_no_reduction_in_a_few_words() -> None:
    assert ex.reduction_cell({}) == "no"
    assert ex.reduction_cell({"script": "x.min.py", "lines": 5}) == "5 lines"
    stopped = "not reduced: interrupted: the best script so far (35 code lines, not verified) is in /w/x.min.py; ..."
    assert ex.reduction_cell({"error": stopped}) == "stopped at 35 lines, unverified"
    assert ex.reduction_cell({"error": "not reduced: /w/final-spec.py fails flakily: 'RuntimeError'"}) == "no: flaky"


BNB_CHECK = Frame(
    "transformers", "transformers.quantizers.quantizer_bnb_4bit", "Bnb4BitHfQuantizer.validate_environment"
)
CPU_OFFLOAD_REFUSED = (
    "ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU "
    "RAM to fit the quantized model."
)


@pytest.mark.parametrize(
    "fp32_cpu_offload, expected", [(False, "refusal:bnb-offload-without-fp32-cpu-offload"), (True, None)]
)
def test_a_documented_refusal_is_not_a_finding_only_when_the_spec_asked_for_it(fp32_cpu_offload, expected) -> None:
    # transformers refuses cpu/disk entries in a quantized load without llm_int8_enable_fp32_cpu_offload, as its docs
    # say; with the flag set, the same refusal would be a bug, so it stays new
    spec = {"quant": {"load_in_4bit": True, "fp32_cpu_offload": fp32_cpu_offload}}
    sig = _sig("ValueError", "Some modules are dispatched on the CPU or the disk", frames=(BNB_CHECK,))
    assert ex.identify(sig, CPU_OFFLOAD_REFUSED, spec, load_catalog()) == expected
    elsewhere = _sig(
        "ValueError",
        "Some modules are dispatched on the CPU or the disk",
        frames=(Frame("peft", "peft.peft_model", "PeftModel.load_adapter"),),
    )
    assert ex.identify(elsewhere, CPU_OFFLOAD_REFUSED, spec, load_catalog()) is None


def test_recorded_refusals_read_as_refusals_in_the_readme_table() -> None:
    recorded = Path(__file__).resolve().parents[1] / "results" / "explore"
    table = ex.summary(recorded, load_catalog())
    refused = [line for line in table.splitlines() if "Some modules are dispatched" in line]
    assert refused and all("refusal by design (bnb-offload-without-fp32-cpu-offload)" in line for line in refused)


def test_a_round_trip_compares_a_new_adapter_with_what_it_held_before_dispatch():
    # the saved adapter of a get_peft_model spec is another random adapter: comparing with it made every such run a
    # "round-trip" finding (two recorded groups, one reduced to 22 lines before the cause was seen)
    placement = {"device_map": "auto", "offload_folder": True, "max_memory": {"cpu": "1MB"}}
    for call, kwargs in (("get_peft_model", {}), ("dispatch_model", {"max_memory": {"cpu": "1MB"}})):
        spec = _witness(
            "one_device_map_forward", action="save_load", placement=placement, peft={"call": call, "kwargs": kwargs}
        )
        lines = render(spec).splitlines()
        compile("\n".join(lines), "<spec>", "exec")
        kept = next(i for i, line in enumerate(lines) if line.startswith("adapter_before = "))
        assert kept == next(i for i, line in enumerate(lines) if line.startswith("model = get_peft_model(")) + 1
        assert "before = adapter_before" in lines
    loaded = _witness(
        "one_device_map_forward",
        action="save_load",
        placement=placement,
        peft={"call": "from_pretrained", "kwargs": {}},
    )
    assert "before = load_file(root + '/adapter/adapter_model.safetensors')" in render(loaded).splitlines()


def test_round_trip_findings_of_a_rendering_without_the_fix_are_withdrawn():
    from minrepro.scenarios.withdrawn import withdrawn_of

    group = {
        "oracle": "round-trip",
        "headline": "AssertionError: save_pretrained wrote another adapter: 20 tensors differ",
        "witness": {"spec": {"peft": {"call": "get_peft_model", "kwargs": {}}, "action": "save_load"}},
    }
    assert withdrawn_of(group, {}) == "withdrawn:round-trip-of-a-new-adapter"
    assert withdrawn_of(group, {"harness_fixes": ["round-trip-of-a-new-adapter"]}) is None  # rendered after the fix
    loaded = {**group, "witness": {"spec": {"peft": {"call": "from_pretrained", "kwargs": {}}, "action": "save_load"}}}
    assert withdrawn_of(loaded, {}) is None  # a loaded adapter's round trip was always right


def test_a_crash_of_our_own_merge_patch_is_withdrawn_only_where_that_patch_was_applied():
    from minrepro.scenarios.withdrawn import withdrawn_of

    group = {
        "oracle": "library error",
        "witness": {"spec": {"peft": {"call": "get_peft_model"}, "action": "parity"}},
        "headline": "RuntimeError: expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != float",
    }
    with_f = {"patches": ["peft/dequantize-merge-quant-state.diff", "peft/lora-4bit-merge-parity.diff"]}
    assert withdrawn_of(group, with_f) == "withdrawn:merge-parity-patch-dtype"
    assert withdrawn_of(group, {"patches": []}) is None  # unpatched, the same crash would be a library's
    assert withdrawn_of(group, {**with_f, "harness_fixes": ["merge-parity-patch-dtype"]}) is None


def test_a_placement_check_on_one_other_gpu_with_ids_on_it_is_withdrawn_before_the_fix_only():
    from minrepro.scenarios.withdrawn import withdrawn_of

    witness = WITNESSES["one_device_map_placement"]
    group = {"oracle": "library error", "headline": witness["headline"], "witness": {"spec": witness["spec"]}}
    assert withdrawn_of(group, {}) == "withdrawn:placement-reference-inputs"
    assert withdrawn_of(group, {"harness_fixes": ["placement-reference-inputs"]}) is None  # rendered after the fix
    split = {**witness["spec"], "placement": {**witness["spec"]["placement"], "device_map": {"": 1, "lm_head": 0}}}
    assert withdrawn_of({**group, "witness": {"spec": split}}, {}) is None  # a split map's mismatch stays a finding
    on_cuda0 = {**witness["spec"], "placement": {**witness["spec"]["placement"], "device_map": {"": 0}}}
    assert withdrawn_of({**group, "witness": {"spec": on_cuda0}}, {}) is None


def test_a_reduced_finding_says_what_it_met_on_the_sets_where_it_failed_otherwise(tmp_path, monkeypatch) -> None:
    """The two-GPU rows came back "fail-other" on two sets each, with nothing about that other failure: the
    outcome now keeps its final line and why it is another."""
    from types import SimpleNamespace

    from minrepro.catalog.manifest import Case
    from minrepro.cli import explore as cli
    from minrepro.harness.signature import Signature

    for name in ("pinned", "newest"):
        (tmp_path / "envs" / name / "bin").mkdir(parents=True)
        (tmp_path / "envs" / name / "bin" / "python").write_text("")
    monkeypatch.setenv("MINREPRO_CACHE", str(tmp_path))
    runs = {
        "pinned": ("KeyError: 'axial'", "KeyError", "'axial'"),
        "newest": ("ValueError: boom", "ValueError", "boom"),
    }

    def run_script(script, python, timeout, isolated):
        headline, type_, message = runs[Path(python).parents[1].name]
        return SimpleNamespace(signature=Signature("exception", type_, message), raw_headline=headline)

    monkeypatch.setattr(cli, "run_script", run_script)
    case = Case(
        id="x",
        script=tmp_path / "x.py",
        family="?",
        device="cpu",
        signature=r"^ValueError: boom$",
        outcomes={},
        fixed_in=(),
        upstream=(),
        owner=None,
    )
    outcomes, others = cli._outcomes(case, SimpleNamespace(sets={"pinned": {}, "reporter": {}, "newest": {}}), 5.0)
    assert outcomes == {"pinned": "fail-other", "newest": "fail"}  # reporter: no env here
    assert others == {"pinned": "KeyError: 'axial' (final line does not match /^ValueError: boom$/)"}


def test_a_finding_explained_by_a_family_under_another_signature_says_so_and_only_there():
    # explore's two-GPU mat2 rows are AC's mechanism (read on the run) with bitsandbytes' or PEFT's frame on top: the
    # table must name the family, mark it as a diagnosis rather than a signature match, and leave other rows alone
    from minrepro.scenarios.diagnosed import DIAGNOSED, diagnosed_of
    from minrepro.scenarios.explore import _family_cell

    row = {
        "headline": "RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:0, different"
    }
    assert diagnosed_of("cuda2-tiny-reporter", row) == DIAGNOSED + "dispatch-nested-entry-keeps-root-hook"
    assert diagnosed_of("cuda-tiny-newest", row) is None  # another exploration: not what was diagnosed
    assert diagnosed_of("cuda2-tiny-reporter", {"headline": "KeyError: 0"}) is None
    cell = _family_cell(
        DIAGNOSED + "dispatch-nested-entry-keeps-root-hook", None, {"dispatch-nested-entry-keeps-root-hook": "AC"}
    )
    assert cell == "new; by diagnosis: AC (dispatch-nested-entry-keeps-root-hook)"


def test_every_diagnosis_names_a_catalog_case_and_a_recorded_finding():
    from minrepro.scenarios.diagnosed import DIAGNOSES

    root = Path(__file__).resolve().parents[1]
    ids = {case.id for case in load_catalog().cases}
    for diagnosis in DIAGNOSES:
        assert diagnosis.case in ids
        report = json.loads((root / "results" / "explore" / diagnosis.exploration / "report.json").read_text())
        assert any(g["headline"].startswith(diagnosis.headline) for g in report["groups"]), diagnosis


def test_a_case_lists_the_explored_findings_that_are_it(tmp_path: Path) -> None:
    """A report's "Where it shows up" names the generated scenarios that met its case: by the case's signature (known
    then or now) and by a recorded diagnosis, each saying which; other findings stay out."""
    from minrepro.reports.report import explored_evidence

    catalog = load_catalog()
    mat2 = "RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:0, different from"
    groups = [
        {
            "key": "a",
            "known": "dispatch-nested-entry-keeps-root-hook",
            "oracle": "library error",
            "count": 2,
            "headline": "RuntimeError: whatever",
            "witness": {},
            "reduction": None,
        },
        {
            "key": "b",
            "known": None,
            "oracle": "library error",
            "count": 1,
            "headline": mat2,
            "witness": {},
            "reduction": None,
        },
        {
            "key": "c",
            "known": "shared-dict-hook-keyerror",
            "oracle": "library error",
            "count": 1,
            "headline": "KeyError: 0",
            "witness": {},
            "reduction": None,
        },
    ]
    doc = {"device": "cuda", "scale": "tiny", "gpus": 2, "set": "reporter", "groups": groups}
    (tmp_path / "cuda2-tiny-reporter").mkdir()
    (tmp_path / "cuda2-tiny-reporter" / "report.json").write_text(json.dumps(doc), encoding="utf-8")

    found = ex.findings_of("dispatch-nested-entry-keeps-root-hook", tmp_path, catalog)
    assert [(f["headline"][:20], f["how"], f["runs"]) for f in found] == [
        ("RuntimeError: whatev", "same signature", 2),
        (mat2[:20], "by diagnosis", 1),
    ]
    case = next(c for c in catalog.cases if c.id == "dispatch-nested-entry-keeps-root-hook")
    text = explored_evidence(case, catalog, tmp_path)
    assert "cuda/tiny, 2 GPU(s), reporter" in text and "by diagnosis" in text and "KeyError" not in text
    assert explored_evidence(case, catalog, tmp_path / "absent") == ""
