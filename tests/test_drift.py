"""`latest` (the index's newest releases, resolved when a command runs) and `minrepro drift`: the index answered by a
stub or a local folder of wheels (no network), the comparison with the newest snapshot, the printed report, the
recorded document and the diff that would move the snapshot. No venv is made here."""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from minrepro.catalog import drift as drift_module
from minrepro.catalog.drift import (
    FAILS_DIFFERENTLY,
    NEWLY_FAILS,
    NO_LONGER_APPLIES,
    NOT_RUN,
    NOW_PASSES,
    STILL_FAILS,
    STILL_PASSES,
    UNDECLARED,
    DriftDocument,
    PatchDrift,
    check_patches,
    classify,
    compare,
    drift_catalog,
    format_report,
    proposal,
)
from minrepro.catalog.manifest import CASES_DIR, check_case, load_catalog
from minrepro.catalog.pages import render_docs
from minrepro.catalog.run import CaseResult
from minrepro.cli import main
from minrepro.envs import latest as latest_module
from minrepro.envs.latest import (
    IndexUnreachable,
    Resolution,
    index_releases,
    newest_final,
    parse_listing,
    resolve_latest,
)
from minrepro.envs.patching import PATCHES_DIR
from minrepro.envs.sets import SETS_FILE, load_sets
from minrepro.errors import MinreproError

ROOT = Path(__file__).resolve().parent.parent
CATALOG = load_catalog()
NEWEST = CATALOG.sets["newest"]
INDEX = {  # what a stub index serves: pre-releases, a local build and older releases beside the newest final one
    "transformers": ["5.22.2", "5.23.0", "5.24.0", "5.25.0rc1", "5.25.0.dev0"],
    "accelerate": ["1.14.0", "1.15.0"],
    "peft": ["0.21.2", "0.22.0.dev0"],
    "bitsandbytes": ["0.50.2", "0.50.2+cu130"],
}
NOW = _dt.datetime(2026, 11, 27, 9, 30, tzinfo=_dt.UTC)


def _ask(package: str, wheelhouse: Path | None) -> list[Version]:
    return sorted(Version(v) for v in INDEX[package])


def _resolution() -> Resolution:
    return resolve_latest(NEWEST, ask=_ask, now=NOW)


# --- resolving latest ------------------------------------------------------------------------------------------


def test_latest_pins_the_newest_final_release_of_each_library_the_snapshot_pins():
    res = _resolution()
    assert res.pins == {"transformers": "5.24.0", "accelerate": "1.15.0", "peft": "0.21.2", "bitsandbytes": "0.50.2"}
    assert res.snapshot == NEWEST.pins() and res.changed() == {
        "transformers": (NEWEST.pins()["transformers"], "5.24.0")
    }
    assert res.date == "2026-11-27T09:30:00Z" and res.source == "the package index"
    vset = res.version_set()
    assert vset.name == "latest" and vset.pins() == res.pins and "2026-11-27" in vset.description
    assert "transformers 5.24.0 (newest 5.23.0)" in res.describe()
    assert Resolution.from_dict(json.loads(json.dumps(res.to_dict()))) == res


def test_latest_never_goes_below_the_snapshot_nor_takes_a_pre_release():
    index = {"transformers": ["5.6.2", "5.24.0rc0"], "accelerate": [], "peft": ["0.21.2"], "bitsandbytes": ["0.50.2"]}
    res = resolve_latest(NEWEST, ask=lambda p, _: [Version(v) for v in index[p]], now=NOW)
    assert res.pins == NEWEST.pins() and res.changed() == {}
    assert newest_final([Version("1.0"), Version("1.1.post1"), Version("1.2a1"), Version("1.1+local")]) == Version(
        "1.1.post1"
    )


def test_an_index_pip_could_not_reach_is_refused_in_one_line_naming_what_latest_needs():
    stderr = (
        "WARNING: pip index is currently an experimental command.\n"
        "Could not fetch URL https://index.example/simple/transformers/: connection error: "
        "HTTPSConnectionPool(host='index.example', port=443): Max retries exceeded with url: /simple/transformers/ "
        "(Caused by NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to "
        "establish a new connection: [Errno -3] Temporary failure in name resolution')) - skipping\n"
    )
    # pip went on with a local mirror's older releases: that answer must not pass for the newest ones
    stdout = "transformers (5.17.0)\nAvailable versions: 5.17.0\n"
    with pytest.raises(IndexUnreachable) as info:
        parse_listing("transformers", 0, stdout, stderr)
    message = str(info.value)
    assert "\n" not in message and "latest set needs the package index" in message
    assert "index.example" in message and "Temporary failure in name resolution" in message
    assert "--set newest" in message and "--wheelhouse" in message


def test_a_project_the_index_does_not_have_is_no_outage_and_the_listing_is_parsed():
    stdout = "peft (0.21.2)\nAvailable versions: 0.21.2, 0.21.1, 0.22.0.dev0, not-a-version\n"
    stderr = "Could not fetch URL https://mirror.example/simple/peft/: 404 Client Error: Not Found for url - skipping\n"
    assert parse_listing("peft", 0, stdout, stderr) == [Version("0.21.1"), Version("0.21.2"), Version("0.22.0.dev0")]
    with pytest.raises(MinreproError, match="cannot list releases of nothing-here: ERROR: No matching distribution"):
        parse_listing("nothing-here", 1, "", "ERROR: No matching distribution found for nothing-here\n")


def _wheel(folder: Path, dist: str, version: str) -> None:
    (folder / f"{dist}-{version}-py3-none-any.whl").write_bytes(b"")


def test_latest_resolves_from_a_local_folder_of_wheels_through_pip(tmp_path):
    for dist, versions in INDEX.items():
        for version in versions:
            if "+" not in version:
                _wheel(tmp_path, dist, version)
    assert index_releases("transformers", tmp_path)[-1] == Version("5.25.0rc1")
    res = resolve_latest(NEWEST, wheelhouse=tmp_path, now=NOW)
    assert res.pins["transformers"] == "5.24.0" and res.source == f"the wheelhouse {tmp_path.name}"


def _offline_pip(monkeypatch):
    def run(cmd, **_kw):
        return subprocess.CompletedProcess(
            cmd,
            0,
            "transformers (5.17.0)\nAvailable versions: 5.17.0\n",
            "Could not fetch URL https://index.example/simple/transformers/: connection error: [Errno 101] Network is "
            "unreachable - skipping\n",
        )

    monkeypatch.setattr(latest_module.subprocess, "run", run)


def test_drift_and_check_refuse_latest_offline_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("MINREPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MINREPRO_WHEELHOUSE", raising=False)
    _offline_pip(monkeypatch)
    for argv in (["drift"], ["check", "peft-floor-unreleased", "--set", "latest"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("minrepro: error: the latest set needs the package index")
    assert not (tmp_path / "cache" / "envs").exists()  # refused before any env was made


def test_a_named_latest_is_resolved_by_the_commands_that_take_it():
    with pytest.raises(MinreproError, match=r"unknown version set 'latest' .*resolved from the index"):
        CATALOG.version_set("latest")


# --- the manifest's view of latest -----------------------------------------------------------------------------


def test_the_floor_case_declares_latest_and_its_pins_are_newer_than_the_snapshot(tmp_path):
    case = next(c for c in CATALOG.cases if c.id == "peft-floor-unreleased")
    assert case.declared("latest") == "fail" and case.newest == "pass" and case.failing_set() == "latest"
    assert check_case(case, CATALOG) == []
    older = tmp_path / case.script.name
    older.write_text(case.script.read_text().replace("transformers==5.24.0", "transformers==5.23.0"))
    assert check_case(replace(case, script=older), CATALOG) == [
        "it first fails on latest, but its block pins no release newer than the newest set's"
    ]


def test_the_drift_catalog_declares_the_snapshots_outcomes_for_latest():
    drifting = drift_catalog(CATALOG, _resolution())
    assert drifting.sets["latest"].pins()["transformers"] == "5.24.0"
    for case in drifting.cases:
        assert case.declared("latest") == case.newest
    assert all(c.case.declared("latest") == "pass" for c in drifting.controls)
    assert "latest" not in CATALOG.sets  # the manifest's catalog is left as it was


# --- the comparison --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "observed", "kind"),
    [
        ("fail", "fail", STILL_FAILS),
        ("fail", "pass", NOW_PASSES),
        ("fail", "fail-other", FAILS_DIFFERENTLY),
        ("fail-other", "fail", FAILS_DIFFERENTLY),
        ("fail-other", "fail-other", STILL_FAILS),
        ("fail-other", "pass", NOW_PASSES),
        ("pass", "pass", STILL_PASSES),
        ("pass", "fail", NEWLY_FAILS),
        ("pass", "fail-other", NEWLY_FAILS),
        ("unreproduced", "fail", NEWLY_FAILS),
        ("fail", "skipped", NOT_RUN),
        (None, "fail", UNDECLARED),
    ],
)
def test_each_outcome_on_latest_is_a_kind_of_drift(declared, observed, kind):
    assert classify(declared, observed) == kind


def _result(case_id: str, observed: str, headline: str = "", family: str | None = None) -> CaseResult:
    case = next((c for c in CATALOG.cases if c.id == case_id), None)
    return CaseResult(
        case_id,
        family or (case.family if case else "control"),
        case.device if case else "cpu",
        case.newest if case else "pass",
        observed,
        headline if observed != "skipped" else "",
        None,
        1.0,
        "",
        headline if observed == "skipped" else "",
    )


RESULTS = [
    _result("quant-state-meta-item", "fail", "RuntimeError: Tensor.item() cannot be called on meta tensors"),
    _result("params4bit-hf-initialized", "pass"),
    _result("dequantize-no-quantized-linear", "pass"),  # declared fail on newest: now passes
    _result("gemma4-clippable-linear-target", "fail-other", "ImportError: cannot import name 'Gemma4ClippableLinear'"),
    _result("peft-floor-unreleased", "fail", "ValueError: The version of PEFT you are using is not compatible"),
    _result("quantized-whole-disk-dequantize", "fail-other", "KeyError: 'weight'"),
    _result("int8-offload-backward-scb", "skipped", "needs CUDA; none in this environment"),
    _result("lora-merge-float", "fail", "AssertionError: merged logits differ"),  # a control
]


def test_compare_names_each_cases_drift_and_what_the_manifest_declares_for_latest():
    recorded = {"quantized-whole-disk-dequantize": "ValueError: You are trying to offload the whole model"}
    rows = {d.case: d for d in compare(CATALOG, RESULTS, recorded)}
    assert rows["quant-state-meta-item"].kind == STILL_FAILS
    assert rows["params4bit-hf-initialized"].kind == STILL_PASSES
    assert rows["dequantize-no-quantized-linear"].kind == NOW_PASSES
    assert rows["gemma4-clippable-linear-target"].kind == FAILS_DIFFERENTLY
    assert rows["peft-floor-unreleased"].kind == NEWLY_FAILS and rows["peft-floor-unreleased"].declared_for_latest
    # declared to fail with another failure first: its type changed since the snapshot's recorded run
    assert rows["quantized-whole-disk-dequantize"].kind == FAILS_DIFFERENTLY
    assert compare(CATALOG, RESULTS)[5].kind == STILL_FAILS  # no recorded run to tell
    assert rows["int8-offload-backward-scb"].kind == NOT_RUN
    assert rows["int8-offload-backward-scb"].headline == "needs CUDA; none in this environment"
    assert rows["lora-merge-float"].family == "control" and rows["lora-merge-float"].kind == NEWLY_FAILS


# --- patches on latest -----------------------------------------------------------------------------------------


def test_check_patches_carries_the_snapshots_diff_forward_where_it_still_lands(monkeypatch, tmp_path):
    from minrepro.envs.patching import HunkReport

    applied, reverted = [], []
    failing = "transformers/tied-head-disk-offload"
    moved = "transformers/gemma4-offloaded-pad-embedding"

    def dry_run(patch, _site):
        status = "FAILED" if patch.id == failing else "applied"
        return [HunkReport(patch.id, "transformers/x.py", 1, status, 10, -5 if patch.id == moved else 0)]

    monkeypatch.setattr(drift_module, "site_packages", lambda env: tmp_path)
    monkeypatch.setattr(drift_module.patching, "check_patch", dry_run)
    monkeypatch.setattr(drift_module.patching, "apply_patches", lambda patches, env: applied.extend(patches))
    monkeypatch.setattr(drift_module.patching, "revert_patches", lambda env: reverted.append(env))
    res = _resolution()
    drifting = drift_catalog(CATALOG, res)
    versions = {**res.pins, "torch": "2.13.0"}
    rows, carried = check_patches(drifting, res.snapshot, versions, tmp_path / "env")
    by_id = {r.patch: r for r in rows}
    assert by_id[failing].status == NO_LONGER_APPLIES and "FAILED" in by_id[failing].detail
    assert by_id[failing].variant == "transformers/tied-head-disk-offload.diff" and failing not in carried
    assert by_id[moved].status == "applies, offset" and by_id[moved].detail == "offset -5 lines"
    assert by_id["transformers/peft-floor-unreleased"].status == "a variant for this release"
    assert by_id["accelerate/quant-state-meta-item"].status == "same release"
    assert by_id["accelerate/params4bit-hf-initialized"].status == "no variant for newest"  # fixed in 1.14
    assert by_id["transformers/gemma4-multimodal-mask-device"].status == "no variant for newest"
    assert [p.id for p in applied] == list(carried) and reverted == [tmp_path / "env"]  # applied in order, then undone
    assert carried[moved].path.name == "gemma4-offloaded-pad-embedding.diff"


# --- the document, the report, the proposal --------------------------------------------------------------------


def _document() -> DriftDocument:
    rows = compare(CATALOG, RESULTS)
    for row in rows:
        if row.case == "peft-floor-unreleased":
            row.changed_by = "transformers 5.24.0"
        if row.case == "dequantize-no-quantized-linear":
            row.changed_by = "transformers 5.24.0"
    patches = [
        PatchDrift(
            "transformers/tied-head-disk-offload",
            NO_LONGER_APPLIES,
            "transformers/tied-head-disk-offload.diff",
            "transformers/modeling_utils.py hunk 1 FAILED",
        ),
        PatchDrift("accelerate/quant-state-meta-item", "same release", "accelerate/quant-state-meta-item.diff"),
        PatchDrift(
            "transformers/gemma4-offloaded-pad-embedding",
            "applies, offset",
            "transformers/gemma4-offloaded-pad-embedding.diff",
            "offset -23 lines",
        ),
    ]
    proof = {
        "cases": [
            {
                "case": "quant-state-meta-item",
                "verdict": "proved",
                "unpatched": "fail",
                "patched": "pass",
                "status": "its patches fix it",
            },
            {
                "case": "dequantize-no-quantized-linear",
                "verdict": "differs",
                "unpatched": "pass",
                "patched": "pass",
                "status": "passes without its patches",
            },
        ],
        "controls": [{"control": "lora-merge-float", "verdict": "differs"}],
    }
    environment = {
        "machine": "cpu",
        "gpu": None,
        "gpus": 0,
        "python": "3.11.7",
        "date": "2026-11-27",
        "versions": {"torch": "2.13.0", **_resolution().pins},
        "cpu_flags": [],
    }
    return DriftDocument(_resolution(), environment, [], rows, patches, proof, 321.0)


def test_the_report_says_per_family_what_changed_and_since_which_release():
    report = format_report(_document(), CATALOG)
    lines = report.splitlines()
    assert lines[0].startswith("latest: transformers 5.24.0 (newest 5.23.0), accelerate 1.15.0")
    assert "the package index served on 2026-11-27" in lines[0]
    row = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ")}
    assert "| newly fails " in row["AG"] and "| still fails " in row["A"]
    assert "now passes" in row["M"] and "passes without its patches" in row["M"]
    assert "fails differently" in row["D"] and "| not run here " in row["N"]
    assert "newly fails" in row["control"]
    assert (
        "- family AG, `peft-floor-unreleased`: newly fails (newest declares 'pass'), since transformers 5.24.0; "
        "the manifest declares latest = 'fail': ValueError" in report
    )
    patch_rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in lines if "| transformers/" in line}
    assert patch_rows["transformers/tied-head-disk-offload"] == "no longer applies"
    assert "accelerate/quant-state-meta-item" not in report  # its library did not move
    assert patch_rows["transformers/gemma4-offloaded-pad-embedding"] == "applies, offset"
    assert "still fails: A, Y" in report
    assert "now passes: M (transformers 5.24.0)" in report
    assert "fails differently: D" in report
    assert "newly fails: AG (transformers 5.24.0), control lora-merge-float" in report
    assert "patches that no longer apply: transformers/tied-head-disk-offload" in report
    assert "not run here: N" in report
    assert "controls with every patch: lora-merge-float differs" in report
    # 3 cases and a control changed, a patch no longer applies, a control differs with the patches
    assert "6 change(s) from the newest snapshot, 1 of them declared for latest in the manifest (cpu, 321 s)" in report


def test_drift_from_a_recorded_run_reports_exits_non_zero_on_change_and_records(tmp_path, capsys):
    recorded = tmp_path / "latest-cpu.json"
    recorded.write_text(json.dumps(_document().to_dict()))
    assert DriftDocument.from_dict(json.loads(recorded.read_text())).to_dict() == _document().to_dict()
    assert main(["drift", "--from", str(recorded)]) == 1
    assert "newly fails: AG" in capsys.readouterr().out
    quiet = _document()
    quiet.drift = [d for d in quiet.drift if not d.change]
    quiet.patches, quiet.proof = [], None
    recorded.write_text(json.dumps(quiet.to_dict()))
    assert main(["drift", "--from", str(recorded)]) == 0
    # --record keeps it in results/drift/ (where the pages read it)
    results = tmp_path / "results"
    assert main(["drift", "--from", str(recorded), "--record", "--results", str(results), "--docs", str(tmp_path)]) == 0
    assert json.loads((results / "drift" / "latest-cpu.json").read_text())["latest"]["pins"]["transformers"] == "5.24.0"


def _checkout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the manifest, the sets and the case scripts, laid out as in the checkout."""
    root = tmp_path / "checkout"
    cases = shutil.copytree(CASES_DIR, root / "minrepro" / "catalog" / "cases")
    sets = root / "minrepro" / "envs" / "sets.toml"
    sets.parent.mkdir(parents=True)
    shutil.copy(SETS_FILE, sets)
    shutil.copytree(PATCHES_DIR, root / "patches")
    return root, cases / "catalog.toml", sets


def test_propose_prints_the_diff_that_moves_the_snapshot_and_it_applies(tmp_path, capsys):
    root, manifest, sets = _checkout(tmp_path)
    catalog = load_catalog(manifest)
    diff = proposal(_document(), catalog, sets, root, root / "patches")
    assert diff.startswith("# Moving the newest snapshot to the releases `minrepro drift` ran on 2026-11-27 (cpu)")
    assert "transformers 5.23.0 -> 5.24.0" in diff and "1 case(s) were not run there" in diff
    assert '-description = "newest releases on 2026-11-22"' in diff
    assert '+description = "newest releases on 2026-11-27"' in diff
    assert '"transformers==5.24.0", "accelerate==1.15.0"' in diff
    assert "+++ b/minrepro/catalog/cases/catalog.toml" in diff and '-latest = "fail"' in diff
    assert '+fixed_in = ["transformers==5.24.0"]' in diff  # the release a bisection named for a case now passing
    assert "1 patch(es) no longer apply and need a port to the new release: transformers/tied-head-disk-offload" in diff
    # a snapshot patch that still lands on the moved release applies to it as well
    assert "+++ b/patches/transformers/gemma4-offloaded-pad-embedding.diff" in diff
    assert "+Applies-to: transformers==5.23.0, transformers==5.24.0" in diff
    # a script that first fails on newest pins newest's releases: they move with it
    assert "+++ b/minrepro/catalog/cases/peft_redispatch_disk_base.py" in diff
    before = {p: p.read_text() for p in (manifest, sets)}
    assert {p: p.read_text() for p in (manifest, sets)} == before  # nothing written
    proc = subprocess.run(["patch", "-p1", "-d", str(root)], input=diff, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    moved = load_catalog(manifest)
    assert load_sets(sets)["newest"].pins()["transformers"] == "5.24.0"
    cases = {c.id: c for c in moved.cases}
    assert cases["peft-floor-unreleased"].outcomes == {"pinned": "pass", "reporter": "pass", "newest": "fail"}
    assert cases["dequantize-no-quantized-linear"].newest == "pass"
    assert cases["dequantize-no-quantized-linear"].fixed_in == ("transformers==5.24.0",)
    assert cases["gemma4-clippable-linear-target"].newest == "fail-other"
    assert cases["int8-offload-backward-scb"].newest == "fail"  # not run: kept
    from minrepro.envs.patching import load_patch

    pad = load_patch(root / "patches" / "transformers" / "gemma4-offloaded-pad-embedding.diff")
    assert pad.applies({"transformers": "5.24.0"}) and pad.applies({"transformers": "5.23.0"})
    moved_with_sets = replace(moved, sets=load_sets(sets))
    for case_id in ("peft-floor-unreleased", "peft-redispatch-disk-base"):
        assert check_case(cases[case_id], moved_with_sets) == [], case_id


def test_drift_propose_from_a_recorded_run_prints_only_the_diff(tmp_path, capsys):
    recorded = tmp_path / "latest-cpu.json"
    recorded.write_text(json.dumps(_document().to_dict()))
    assert main(["drift", "--from", str(recorded), "--propose"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Moving the newest snapshot") and "--- a/minrepro/envs/sets.toml" in out
    assert "still fails:" not in out


# --- the pages -------------------------------------------------------------------------------------------------


def test_family_pages_say_what_latest_did_on_which_releases_and_when(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results)
    shutil.rmtree(results / "drift", ignore_errors=True)  # this test's drift run on cpu alone
    (results / "drift").mkdir()
    (results / "drift" / "latest-cpu.json").write_text(json.dumps(_document().to_dict()))
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "docs" / "catalog.md", docs / "catalog.md")
    shutil.copy(ROOT / "docs" / "benchmarks.md", docs / "benchmarks.md")
    page = render_docs(CATALOG, results, docs)[docs / "families" / "peft-floor-unreleased.md"]
    assert "| latest | fail | fail: newly fails, transformers 5.24.0 (2026-11-27) | not run |" in page
    assert (
        "- latest on cpu: transformers 5.24.0, accelerate 1.15.0, peft 0.21.2, bitsandbytes 0.50.2 (the newest " in page
    )
    assert "the package index served on 2026-11-27" in page
    assert "- newest: transformers 5.23.0" in page
    a_page = render_docs(CATALOG, results, docs)[docs / "families" / "quant-state-meta-item.md"]
    assert "| pinned | fail | fail ✓ (" in a_page  # each recorded cell says when it was seen


def test_a_run_of_some_cases_is_laid_over_the_machines_record_on_the_same_releases():
    """Two-GPU cases run on a two-GPU box replace their rows in the record a one-GPU box made; the rest stays, and the
    record says which cases ran where. A run on other releases replaces the record."""
    from minrepro.catalog.drift import merged

    recorded = _document()
    recorded.results = [{"case": d.case, "observed": d.observed} for d in recorded.drift]
    [first, *_] = recorded.drift
    run = _document()
    run.drift = [replace(first, observed="fail", kind="newly fails")]
    run.results = [{"case": first.case, "observed": "fail"}]
    run.patches = [PatchDrift("accelerate/quant-state-meta-item", "applies, offset", "x.diff", "offset 2")]
    run.proof = {"cases": [{"case": first.case, "verdict": "proved"}], "controls": []}
    run.environment = {**run.environment, "machine": "cuda", "gpu": "H100", "gpus": 2, "date": "2026-11-28"}
    both = merged(recorded, run)
    assert [d.case for d in both.drift] == [*(d.case for d in recorded.drift[1:]), first.case]
    assert {d.case: d.kind for d in both.drift}[first.case] == "newly fails"
    assert len(both.results) == len(recorded.results)
    assert {p.patch: p.status for p in both.patches}["accelerate/quant-state-meta-item"] == "applies, offset"
    assert len(both.patches) == len(recorded.patches)
    kept = [r["case"] for r in recorded.proof["cases"] if r["case"] != first.case]
    assert [r["case"] for r in both.proof["cases"]] == [*kept, first.case]
    assert both.proof["controls"] == recorded.proof["controls"]
    assert both.environment["also_ran"] == [
        {"cases": [first.case], "machine": "cuda", "gpu": "H100", "gpus": 2, "date": "2026-11-28"}
    ]
    assert both.environment["gpus"] == recorded.environment["gpus"]
    other = _document()
    other.resolution = replace(other.resolution, pins={**other.resolution.pins, "transformers": "5.25.0"})
    assert merged(recorded, other) is other
    from minrepro.catalog.pages import _seen

    recorded_dict = both.to_dict()
    # a case laid over the record shows its own run's date and GPU count, the others the record's date
    assert _seen(recorded_dict, first.case) == f"{run.environment['date']}, 2 GPUs"
    assert _seen(recorded_dict, recorded.drift[1].case) == recorded.environment["date"]
