"""The manifest and the case scripts obey the catalog's rules; bad manifests fail with one line."""

from __future__ import annotations

import json
import tempfile
import textwrap
from pathlib import Path

import pytest

from minrepro.catalog.manifest import (
    CASES_DIR,
    check_case,
    code_lines,
    expected_outcome,
    load_catalog,
    script_metadata,
)
from minrepro.errors import MinreproError
from minrepro.harness.signature import parse_traceback

CATALOG = load_catalog()
FAMILIES_REQUIRED = {"A", "A'", "B", "C", "D", "E", "F", "G"}


def test_every_required_family_has_a_case():
    assert {case.family for case in CATALOG.cases} >= FAMILIES_REQUIRED


@pytest.mark.parametrize("case", CATALOG.cases + tuple(c.case for c in CATALOG.controls), ids=lambda c: c.id)
def test_case_script_obeys_the_rules(case):
    assert check_case(case, CATALOG) == []


@pytest.mark.parametrize("case", [c for c in CATALOG.cases if c.seed_trace], ids=lambda c: c.id)
def test_declared_owner_is_the_seed_traces_owner(case):
    seed = parse_traceback(case.seed_trace.read_text(encoding="utf-8"))
    assert seed is not None
    assert case.owner is not None and case.owner.endswith(seed.coarse().frames[0].function)
    assert case.owner.split(":")[0] == seed.coarse().frames[0].module


def test_code_lines_ignore_docstring_comments_blank_lines_and_the_script_block():
    source = textwrap.dedent('''\
        # /// script
        # dependencies = ["torch"]
        # ///
        """Docstring
        over lines."""
        import torch  # a comment

        x = torch.zeros(
            3)
    ''')
    assert code_lines(source) == 3
    assert script_metadata(source) == {"dependencies": ["torch"]}


def _manifest(tmp_path: Path, case_toml: str) -> Path:
    (tmp_path / "ok.py").write_text("raise SystemExit(1)\n")
    sets = (CASES_DIR / "catalog.toml").read_text().split("[[case]]")[0]
    path = tmp_path / "catalog.toml"
    path.write_text(sets + "[[case]]\n" + textwrap.dedent(case_toml))
    return path


GOOD = """\
    id = "x"
    script = "ok.py"
    family = "Z"
    device = "cpu"
    signature = "SystemExit"
    pinned = "fail"
    newest = "pass"
    fixed_in = ["accelerate==1.14.0"]
    upstream = []
"""


def test_a_good_manifest_loads(tmp_path):
    assert [c.id for c in load_catalog(_manifest(tmp_path, GOOD)).cases] == ["x"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('family = "Z"\n', ""), "missing field(s): family"),
        (lambda t: t + 'colour = "red"\n', "unknown field(s): colour"),
        (lambda t: t.replace('pinned = "fail"', 'pinned = "broken"'), "pinned = 'broken'"),
        (lambda t: t.replace('device = "cpu"', 'device = "tpu"'), "device = 'tpu'"),
        (lambda t: t.replace('signature = "SystemExit"', 'signature = "("'), "not a valid regex"),
        (lambda t: t.replace('"ok.py"', '"gone.py"'), "script gone.py not found"),
        (lambda t: t.replace('"accelerate==1.14.0"', '"accelerate>=1"'), "is not NAME==VERSION"),
        (lambda t: t + "requires_gpus = 2\n", "requires_gpus = 2, expected a count on a cuda case"),
        (lambda t: t.replace('"cpu"', '"cuda"') + 'requires_gpus = "two"\n', "requires_gpus = 'two'"),
    ],
)
def test_bad_manifest_entries_are_one_line_errors(tmp_path, edit, message):
    with pytest.raises(MinreproError) as info:
        load_catalog(_manifest(tmp_path, edit(textwrap.dedent(GOOD))))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unknown_case_id_is_a_one_line_error():
    with pytest.raises(MinreproError, match="unknown case id: nope"):
        CATALOG.select(["nope"])


def test_expected_outcome_follows_sets_then_fixed_in():
    case = CATALOG.select(["params4bit-hf-initialized"])[0]
    assert expected_outcome(case, "pinned", {}) == "fail"
    assert expected_outcome(case, "newest", {}) == "pass"
    assert expected_outcome(case, None, {"accelerate": "1.13.0", "bitsandbytes": "0.49.2"}) == "fail"
    assert expected_outcome(case, None, {"accelerate": "1.13.0", "bitsandbytes": "0.50.0"}) == "pass"
    assert expected_outcome(case, None, {"accelerate": "1.14.0", "bitsandbytes": None}) == "pass"
    unfixed = CATALOG.select(["quant-state-meta-item"])[0]
    assert expected_outcome(unfixed, None, {}) is None


def test_installed_versions_select_a_set():
    assert CATALOG.detect_set(CATALOG.sets["newest"].pins()) == "newest"
    assert CATALOG.detect_set({"transformers": "5.17.0"}) is None


def test_no_module_shadows_the_standard_library():
    # the fork server runs with minrepro/ on sys.path: a minrepro/bisect.py once replaced stdlib bisect there
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    names = {p.stem for d in ("minrepro", "reducers") for p in (root / d).glob("*.py")}
    assert not names & set(sys.stdlib_module_names)


def test_cpu_only_cases_are_skipped_where_cuda_is_present():
    from minrepro.catalog.manifest import load_catalog
    from minrepro.catalog.run import Environment, skip_reason

    [case] = load_catalog().select(["linear4bit-cpu-repack-rewrite"])
    gpu_box = Environment("python", "3.12", {}, True, "H100", ("avx512_bf16",))
    cpu_box = Environment("python", "3.11", {}, False, None, ("avx512_bf16",))
    old_cpu = Environment("python", "3.11", {}, False, None, ("avx2",))
    assert "without CUDA" in skip_reason(case, gpu_box) and "AVX512-BF16" in skip_reason(case, gpu_box)
    assert skip_reason(case, cpu_box) is None
    assert "avx512_bf16" in skip_reason(case, old_cpu)
    [no_accelerator] = load_catalog().select(["int8-disk-offload-cpu-execution"])  # its own reason, not H's
    reason = skip_reason(no_accelerator, gpu_box)
    assert "Int8Params.to(0)" in reason and "AVX512" not in reason


def test_requires_no_cuda_takes_a_reason_or_a_bool():
    from minrepro.catalog.manifest import _no_cuda
    from minrepro.errors import MinreproError

    assert _no_cuda("c", False) == "" and "bitsandbytes" in _no_cuda("c", True)
    assert _no_cuda("c", " no accelerator ") == "no accelerator"
    with pytest.raises(MinreproError, match="requires_no_cuda must be"):
        _no_cuda("c", 1)


def test_two_gpu_cases_skip_on_one_gpu_and_run_where_the_count_is_unknown():
    from minrepro.catalog.run import Environment, skip_reason

    [case] = load_catalog().select(["gemma4-multimodal-mask-second-gpu"])
    assert case.requires_gpus == 2
    one, two = (Environment("python", "3.12", {}, True, "H200", (), gpus) for gpus in (1, 2))
    assert "needs 2 GPUs" in skip_reason(case, one) and skip_reason(case, two) is None
    unknown = Environment.recorded({"set": "pinned", "machine": "cuda", "python": "3.12"})  # no "gpus" kept
    assert unknown.gpus is None and skip_reason(case, unknown) is None
    cpu = Environment.recorded({"set": "pinned", "machine": "cpu", "python": "3.11"})
    assert "needs CUDA" in skip_reason(case, cpu)


def test_matrix_cells_for_cases_a_recorded_run_did_not_have():
    # a case added after a run reads "not run", unless that run's environment could not have run it
    from minrepro.catalog.matrix import _cell, render_patched

    [case] = load_catalog().select(["gemma4-multimodal-mask-second-gpu"])
    cpu_doc = {"set": "pinned", "machine": "cpu", "python": "3.11", "cpu_flags": []}
    h100_doc = {"set": "pinned", "machine": "cuda", "python": "3.12", "gpus": 1}
    old_cuda_doc = {"set": "pinned", "machine": "cuda", "python": "3.12"}
    assert (_cell(case, None, cpu_doc), _cell(case, None, h100_doc)) == ("skipped", "skipped")
    assert _cell(case, None, old_cuda_doc) == "not run"
    whole = {**old_cuda_doc, "gpu": "H200", "applied": [], "hunks": [], "date": "d", "cases": []}
    alone = {
        ("pinned", "cuda"): {
            **whole,
            "files": ["`cases/x.json` (H200)"],
            "cases": [{"case": case.id, "verdict": "proved"}],
        }
    }
    catalog = load_catalog()
    without = render_patched(catalog, {("pinned", "cuda"): whole})
    with_single = render_patched(catalog, {("pinned", "cuda"): whole}, alone)
    row = next(line for line in with_single.splitlines() if f"`{case.id}`" in line)
    assert "proved ✓" in row and "proved" not in next(line for line in without.splitlines() if f"`{case.id}`" in line)
    assert "single cases: `cases/x.json` (H200)" in with_single


def test_catalog_matrix_takes_a_case_run_alone_where_the_whole_set_run_lacks_it():
    from minrepro.catalog.matrix import render

    catalog = load_catalog()
    [case] = catalog.select(["root-entry-disk-offload"])
    whole = {
        "set": "newest",
        "machine": "cpu",
        "python": "3.11",
        "cpu_flags": [],
        "gpu": None,
        "versions": {},
        "date": "d",
        "cases": [],
    }
    alone = {
        ("newest", "cpu"): {
            **whole,
            "files": ["`cases/y.json` (CPU)"],
            "cases": [{"case": case.id, "observed": "pass"}],
        }
    }
    row = next(
        line for line in render(catalog, {("newest", "cpu"): whole}, alone).splitlines() if f"`{case.id}`" in line
    )
    assert "pass ✗ differs" in row  # judged against the manifest (it declares fail), not taken on trust
    without = next(line for line in render(catalog, {("newest", "cpu"): whole}).splitlines() if f"`{case.id}`" in line)
    assert "pass" not in without.split("|", 4)[4]


def test_catalog_matrix_keeps_a_two_gpu_record_where_the_whole_set_machine_skipped_the_case():
    # a one-GPU whole-set run skips the two-GPU case; its record from two H200s stays in results/cases/
    from minrepro.catalog.matrix import render

    catalog = load_catalog()
    [case] = catalog.select(["gemma4-multimodal-mask-second-gpu"])
    whole = {
        "set": "pinned",
        "machine": "cuda",
        "python": "3.12",
        "gpus": 1,
        "gpu": "H100",
        "versions": {},
        "date": "d",
        "cases": [{"case": case.id, "observed": "skipped"}],
    }
    alone = {
        ("pinned", "cuda"): {
            **whole,
            "gpus": 2,
            "gpu": "H200",
            "files": ["`cases/z.json` (H200)"],
            "cases": [{"case": case.id, "observed": "fail"}],
        }
    }
    row = next(
        line for line in render(catalog, {("pinned", "cuda"): whole}, alone).splitlines() if f"`{case.id}`" in line
    )
    assert "| fail ✓ |" in row
    alone_only = next(
        line for line in render(catalog, {("pinned", "cuda"): whole}).splitlines() if f"`{case.id}`" in line
    )
    assert "| skipped |" in alone_only and "fail ✓" not in alone_only


def test_patched_matrix_takes_a_later_proof_of_one_case_over_the_whole_set_proof():
    # F's patch changed after the whole-set proof: its re-proof alone, recorded later, is what the table shows
    from minrepro.catalog.matrix import load_single_cases, render_patched

    catalog = load_catalog()
    [case] = catalog.select(["lora-4bit-merge-parity"])
    whole = {
        "set": "pinned",
        "machine": "cpu",
        "python": "3.11",
        "cpu_flags": [],
        "gpu": None,
        "applied": [],
        "hunks": [],
        "date": "2026-11-23",
        "cases": [{"case": case.id, "verdict": "proved"}],
    }
    for date, verdict, shown in (
        ("2026-11-24", "patched still fails", "patched still fails ✗"),
        ("2026-11-22", "patched still fails", "proved ✓"),
    ):
        directory = Path(tempfile.mkdtemp())
        (directory / "f.json").write_text(
            json.dumps({**whole, "date": date, "cases": [{"case": case.id, "verdict": verdict}]})
        )
        table = render_patched(catalog, {("pinned", "cpu"): whole}, load_single_cases(directory))
        assert f"| {shown} |" in next(line for line in table.splitlines() if f"`{case.id}`" in line)


def test_matrix_applies_todays_skip_rules_to_recorded_results():
    from minrepro.catalog.manifest import load_catalog
    from minrepro.catalog.matrix import _cell

    [case] = load_catalog().select(["linear4bit-cpu-repack-rewrite"])
    entry = {"case": case.id, "observed": "pass"}
    cuda_doc = {"set": "pinned", "machine": "cuda", "python": "3.12"}  # recorded before flags were kept
    cpu_doc = {"set": "pinned", "machine": "cpu", "python": "3.11", "cpu_flags": ["avx512_bf16"]}
    old_cpu_doc = {"set": "pinned", "machine": "cpu", "python": "3.11", "cpu_flags": ["avx2"]}
    assert _cell(case, entry, cuda_doc) == "skipped (observed pass)"
    assert _cell(case, entry, cpu_doc) == "pass ✗ differs"
    assert _cell(case, {**entry, "observed": "fail"}, cpu_doc) == "fail ✓"
    assert _cell(case, entry, old_cpu_doc) == "skipped (observed pass)"


def test_fail_other_is_declared_and_checked_as_such():
    from minrepro.catalog.run import verdict
    from minrepro.catalog.proof import ProofRow, _verdict

    assert verdict("fail-other", "fail-other") == "as declared"
    assert verdict("fail-other", "fail") == "differs" and verdict("fail-other", "pass") == "differs"
    no_patch = ProofRow("c", "I", [], "fail-other", "fail-other", "", "fail", "fail-other", "", "")
    assert _verdict(no_patch) == "no patch for this release"
    patched = ProofRow("c", "I", ["p"], "fail-other", "fail-other", "", "pass", "pass", "", "")
    assert _verdict(patched) == "proved"


def test_a_listed_patch_of_another_family_is_not_missing_where_its_bug_is_fixed_upstream():
    """V's fix on peft 0.19.1 takes R's backport first (R's KeyError comes first there); on newest R is upstream
    (peft 0.21.0), R's patch has no variant, and V's case is still fully patched. Its own patch missing is missing."""
    from dataclasses import replace

    from minrepro.catalog.proof import _missing
    from minrepro.envs import patching

    catalog = load_catalog()
    [case] = catalog.select(["peft-offload-tied-weight"])
    assert "peft/peft-update-offload-prefix" in case.patches
    for name in ("pinned", "newest"):
        chosen = patching.select(list(case.patches), catalog.sets[name].pins())
        assert _missing(catalog, case, chosen, name) == [], name
    newest = patching.select(list(case.patches), catalog.sets["newest"].pins())
    assert [p.id for p in newest] == ["transformers/tied-head-disk-offload", "peft/peft-offload-tied-weight"]
    without_own = [p for p in newest if p.id != "peft/peft-offload-tied-weight"]
    assert _missing(catalog, case, without_own, "newest") == ["peft/peft-offload-tied-weight"]
    # were R live on newest with no port there, V's case would lack it
    live = replace(
        catalog,
        cases=tuple(
            replace(c, outcomes={**c.outcomes, "newest": "fail"}) if c.id == "peft-update-offload-prefix" else c
            for c in catalog.cases
        ),
    )
    assert _missing(live, case, newest, "newest") == ["peft/peft-update-offload-prefix"]


def test_proof_runs_cases_at_once_and_keeps_their_order(monkeypatch):
    # the pinned proof ran its cases one by one, cold, and did not finish in 570 s on the H100
    import threading
    import time

    from minrepro.catalog import proof

    running, peak = [0], [0]
    lock = threading.Lock()

    def outcome(case, env, timeout, absent=()):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05 * (3 - int(case)))  # the first case finishes last
        with lock:
            running[0] -= 1
        return ("fail", case)

    monkeypatch.setattr(proof, "_outcome", outcome)
    assert proof._outcomes(["0", "1", "2"], None, 1.0, jobs=3) == [("fail", "0"), ("fail", "1"), ("fail", "2")]
    assert peak[0] == 3
    peak[0] = 0
    proof._outcomes(["0", "1", "2"], None, 1.0, jobs=1)
    assert peak[0] == 1


def test_a_headline_regex_frees_paths_as_the_signature_does():
    # explore's candidate case for accelerate's missing index.json kept its temp dir literal: fail-other everywhere
    import re

    from minrepro.catalog.targets import headline_regex

    regex = headline_regex("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/run-m4g/tmp1k/index.json'")
    assert re.search(regex, "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/other/x9/index.json'")
    assert not re.search(regex, "PermissionError: [Errno 13] Permission denied: '/tmp/other/x9/index.json'")


def test_a_patch_that_breaks_a_case_whose_precondition_is_absent_is_harm(monkeypatch):
    """A patch is proved twice: H's patch fixed its case on an AVX512-BF16 CPU and turned the same case from pass into
    a wrong output (max error 2.74) on a CPU without it, where the case is skipped as out of its precondition."""
    from types import SimpleNamespace

    from minrepro.catalog import proof

    outcomes = {
        ("clean", "h"): ("pass", ""),
        ("patched", "h"): ("fail", "AssertionError: max error 2.74"),
        ("clean", "x"): ("fail", "E"),
        ("patched", "x"): ("fail", "E"),
    }
    monkeypatch.setattr(proof, "_outcome", lambda case, env, timeout, absent=(): outcomes[(env, case.id)])
    rows = {c: proof.ProofRow(c, "H", [], "fail", "skipped", "", "pass", "skipped", "", "skipped") for c in "hx"}
    cases = [SimpleNamespace(id="h"), SimpleNamespace(id="x")]
    proof._prove_no_harm(cases, rows, proof.Sides("clean", "patched"), proof.ProofRuns(1.0, lambda _: None))
    assert rows["h"].no_harm.startswith("harm: pass -> fail") and "2.74" in rows["h"].no_harm
    assert rows["x"].no_harm == "no harm: fail -> fail"
    assert rows["h"].verdict == "skipped"  # the case's own proof is still not claimed here


def test_an_emulable_precondition_present_here_is_proved_without_it_as_well(monkeypatch):
    """On an AVX512-BF16 CPU the H case runs as declared and again with the feature emulated absent; the emulated
    comparison is recorded apart and counts as harm the same way."""
    from types import SimpleNamespace

    from minrepro.catalog import proof

    seen = []

    def outcome(case, env, timeout, absent=()):
        seen.append((env, case.id, absent))
        return ("fail", "AssertionError: max error 2.74") if env == "patched" else ("pass", "")

    monkeypatch.setattr(proof, "_outcome", outcome)
    rows = {"h": proof.ProofRow("h", "H", [], "fail", "fail", "", "pass", "pass", "", "proved")}
    case = SimpleNamespace(id="h", requires_cpu_flags=("avx512_bf16", "avx512f"))
    proof._prove_no_harm(
        [case], rows, proof.Sides("clean", "patched"), proof.ProofRuns(1.0, lambda _: None), emulated=True
    )
    assert seen == [("clean", "h", ("avx512_bf16",)), ("patched", "h", ("avx512_bf16",))]  # avx512f: not emulable
    assert rows["h"].no_harm == "" and rows["h"].no_harm_emulated.startswith("harm: pass -> fail")
    assert "emulated without its CPU feature, harm" in proof.format_proof({"cases": [{**vars(rows["h"])}]})


def test_an_emulation_that_did_not_take_effect_is_not_a_no_harm_proof(monkeypatch):
    from types import SimpleNamespace

    from minrepro.catalog import proof
    from minrepro.harness.runner import RunResult

    ran = RunResult(0, "", "", 0.1, None, "", emulated_absent=())  # the script never imported bitsandbytes
    monkeypatch.setattr(proof, "run_script", lambda *a, **k: ran)
    case = SimpleNamespace(id="h", script="h.py", requires_cpu_flags=("avx512_bf16",))
    assert proof._outcome(case, SimpleNamespace(python="py"), 1.0, ("avx512_bf16",))[0] == proof.NOT_EMULATED
    rows = {"h": proof.ProofRow("h", "H", [], "fail", "fail", "", "pass", "pass", "", "proved")}
    sides = proof.Sides(SimpleNamespace(python="py"), SimpleNamespace(python="py"))
    proof._prove_no_harm([case], rows, sides, proof.ProofRuns(1.0, lambda _: None), emulated=True)
    assert rows["h"].no_harm_emulated.startswith("not checked: the emulation did not take effect")


def test_one_label_names_the_machine_a_run_was_recorded_on():
    """The matrix, the reports and the kits name a machine the same way (three spellings had grown apart)."""
    from minrepro.harness.probe import Environment

    def label(**doc) -> str:
        return Environment.recorded({"python": "3.12", "versions": {}, **doc}).label

    assert label(machine="cpu", gpu=None, gpus=0) == "CPU only"
    assert label(machine="cuda", gpu="NVIDIA H100 80GB HBM3", gpus=2) == "2 x NVIDIA H100 80GB HBM3"
    assert label(machine="cuda", gpu="NVIDIA H200") == "NVIDIA H200"  # recorded before the count was


def test_controls_pass_unpatched_and_a_patch_that_breaks_one_is_harm(monkeypatch):
    """Q's and V's first patches passed their own proofs with 0 harm and broke a base accelerate paged to disk itself
    (found by a realistic script, lowmem_chat_server): a control runs on both sides of every proof."""

    from minrepro.catalog import proof
    from minrepro.envs import patching

    catalog = load_catalog()
    known = {p.id for p in patching.load_patches()}
    assert catalog.controls and all(set(c.near) <= known for c in catalog.controls)
    assert all(set(c.case.outcomes.values()) == {"pass"} for c in catalog.controls)
    assert not {c.case.id for c in catalog.controls} & {c.id for c in catalog.cases}
    control = catalog.controls[0]
    outcomes = {"clean": ("pass", ""), "patched": ("fail-other", "KeyError: 'safetensors_file'")}
    monkeypatch.setattr(proof, "_outcome", lambda case, env, timeout, absent=(): outcomes[env])
    monkeypatch.setattr(proof, "skip_reason", lambda case, env: None)
    sides, runs = proof.Sides("clean", "patched"), proof.ProofRuns(1.0, lambda _: None)
    [row] = proof._prove_controls([control], sides, runs)
    assert row["verdict"] == "harm" and "safetensors_file" in row["patched_headline"]
    outcomes["patched"] = ("pass", "")
    assert proof._prove_controls([control], sides, runs)[0]["verdict"] == "no harm"
    outcomes["clean"] = ("fail-other", "E")  # the catalog's claim is wrong
    assert proof._prove_controls([control], sides, runs)[0]["verdict"] == "differs"


def test_a_control_is_also_run_without_a_cpu_feature_it_names_where_this_cpu_has_it(monkeypatch):
    """bitsandbytes picks its CPU kernels by AVX512-BF16 (H's reported harm was on a CPU without it): the 4-bit control
    runs again with the feature emulated absent, and harm there is harm."""
    from types import SimpleNamespace

    from minrepro.catalog import proof

    [control] = [c for c in load_catalog().controls if c.emulate_absent]
    assert set(control.emulate_absent) <= set(proof.EMULABLE_ABSENT)
    seen = []

    def outcome(case, env, timeout, absent=()):
        seen.append((env.name, absent))
        return ("fail-other", "max error 2.74") if env.name == "patched" and absent else ("pass", "")

    monkeypatch.setattr(proof, "_outcome", outcome)
    monkeypatch.setattr(proof, "skip_reason", lambda case, env: None)
    clean, patched = (SimpleNamespace(name=n, cpu_flags=("avx512_bf16",)) for n in ("clean", "patched"))
    [row] = proof._prove_controls([control], proof.Sides(clean, patched), proof.ProofRuns(1.0, lambda _: None))
    assert row["verdict"] == "harm" and row["emulated_absent"]["verdict"] == "harm"
    assert ("patched", ("avx512_bf16",)) in seen
    seen.clear()
    clean.cpu_flags = patched.cpu_flags = ()  # a CPU without it: the plain pair already is that run
    [row] = proof._prove_controls([control], proof.Sides(clean, patched), proof.ProofRuns(1.0, lambda _: None))
    assert row["verdict"] == "no harm" and "emulated_absent" not in row and all(not a for _, a in seen)


def test_a_control_entry_is_checked_like_a_case(tmp_path):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    head = '[sets.pinned]\nrequirements = ["peft==0.19.1"]\n[sets.newest]\nrequirements = ["peft==0.21.2"]\n'
    manifest = tmp_path / "catalog.toml"
    manifest.write_text(head + '[[control]]\nid = "c"\nscript = "ok.py"\ndevice = "cpu"\nnear = []\n')
    assert load_catalog(manifest).controls[0].case.outcomes == {"pinned": "pass", "newest": "pass"}
    manifest.write_text(head + '[[control]]\nid = "c"\nscript = "ok.py"\ndevice = "cpu"\n')
    with pytest.raises(MinreproError, match="control #1 \\(c\\): missing near"):
        load_catalog(manifest)
    manifest.write_text(head + '[[control]]\nid = "c"\nscript = "ok.py"\ndevice = "cpu"\nnear = []\nsignature = "x"\n')
    with pytest.raises(MinreproError, match="unknown field"):
        load_catalog(manifest)
