"""benchmarks/gpu_box.py, the GPU box's one entry point: its arguments, the steps it plans and the commands it would
run (checked on CPU through --dry-run and its planning functions), and its time limit on a real process."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gpu_box", ROOT / "benchmarks" / "gpu_box.py")
gpu_box = importlib.util.module_from_spec(_spec)
sys.modules["gpu_box"] = gpu_box  # dataclasses look their module up by name
_spec.loader.exec_module(gpu_box)


def _dry_run(capsys, *argv: str) -> str:
    assert gpu_box.main([*argv, "--dry-run"]) == 0
    return capsys.readouterr().out


def _commands(args) -> list:
    return [command for step in gpu_box.plan(args) for lane in step.lanes for command in lane]


def test_one_gpu_plans_every_step_but_the_two_gpu_rows(capsys):
    out = _dry_run(capsys, "--gpus", "1")
    assert [line[2:] for line in out.splitlines() if line.startswith("# ") and line[2:3].isalpha()][1:] == [
        "catalog",
        "patched",
        "reduce-round",
    ]
    assert "CUDA_VISIBLE_DEVICES=0 " in out
    for vset in gpu_box.version_sets():
        assert f"nox -s 'minrepro({vset})'" in out and f"nox -s 'patched({vset})'" in out


def test_two_gpus_add_the_rows_and_run_two_reductions_side_by_side():
    args = gpu_box.parse_args(["--gpus", "2"])
    steps = {step.name: step for step in gpu_box.plan(args)}
    assert list(steps) == list(gpu_box.STEPS)
    reduce_lanes = steps["reduce-round"].lanes[1:]  # the first makes the envs
    assert [{c.env["CUDA_VISIBLE_DEVICES"] for c in lane} for lane in reduce_lanes] == [{"0"}, {"1"}]
    rows = [c for c in steps["two-gpu-rows"].lanes[0] if "signature" in c.argv]
    assert rows and all("--placement" in c.argv for c in rows)


def test_the_reduce_round_keeps_bench_py_s_interface():
    args = gpu_box.parse_args(["reduce-round", "--gpus", "1", "--workdir", "/w", "--reduce-sets", "newest"])
    bench = [c for c in _commands(args) if "benchmarks/scale/bench.py" in c.argv]
    assert {c.argv[c.argv.index("--case") + 1] for c in bench} == set(gpu_box.bench_gpu_cases())
    for command in bench:
        assert command.argv[command.argv.index("--python") + 1] == "/w/envs/newest/bin/python"
        assert command.argv[command.argv.index("--workdir") + 1] == "/w/reduce/newest"
        assert command.argv[command.argv.index("--results") + 1] == "/w/reduce/newest/rows.jsonl"


def test_bench_cases_come_from_bench_py_unless_named():
    assert gpu_box.bench_gpu_cases() and all(c.startswith("gpu-") for c in gpu_box.bench_gpu_cases())
    args = gpu_box.parse_args(
        ["reduce-round", "--gpus", "1", "--reduce-case", "cpu-gemma3-eval", "--reduce-sets", "pinned"]
    )
    assert [c.log for c in _commands(args) if "--case" in c.argv] == ["cpu-gemma3-eval-pinned.log"]


def test_an_offline_box_installs_from_the_wheelhouse_and_stays_off_the_hub(tmp_path, capsys):
    out = _dry_run(capsys, "--gpus", "2", "--wheelhouse", str(tmp_path))
    assert f"MINREPRO_WHEELHOUSE={tmp_path}" in out and "HF_HUB_OFFLINE=1" in out
    assert f"env create {tmp_path.parent}" not in out and f"--wheelhouse {tmp_path}" in out


def test_record_and_sets_reach_nox(capsys):
    out = _dry_run(capsys, "catalog", "--gpus", "1", "--sets", "newest", "--record", "--jobs", "4")
    assert out.splitlines()[2:] == [f"{sys.executable} -m nox -s 'minrepro(newest)' -- --record --jobs 4"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["two-gpu-rows", "--gpus", "1"], "two-gpu-rows needs two GPUs"),
        (["bisect", "--gpus", "1"], "unknown step bisect"),
        (["--gpus", "1", "--sets", "pinned,oldest"], "unknown set oldest"),
        (["reduce-round", "--gpus", "2", "--reduce-case", "gpu-gemma4-e4b-eval,gpu-e9b"], "unknown case gpu-e9b"),
        (["--gpus", "1", "--time-limit", "0"], "--time-limit must be a positive"),
        (["--gpus", "0"], "no GPU"),
    ],
)
def test_bad_arguments_are_one_line(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gpu_box.parse_args(argv)
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err.splitlines()[-1]


def test_a_command_at_the_time_limit_is_stopped_and_a_late_one_not_started(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_box, "MIN_START_SECONDS", 0)
    monkeypatch.setattr(gpu_box, "GRACE_SECONDS", 5)
    sleeper = gpu_box.Command([sys.executable, "-c", "import time; time.sleep(60)"], "sleep.log")
    began = time.monotonic()
    assert gpu_box.run_command(sleeper, {}, tmp_path, gpu_box.Clock(1.0)) == "stopped at the time limit"
    assert time.monotonic() - began < 20
    monkeypatch.setattr(gpu_box, "MIN_START_SECONDS", 60)
    assert gpu_box.run_command(sleeper, {}, tmp_path, gpu_box.Clock(30.0)).startswith("skipped (")


def test_an_env_an_earlier_run_made_is_kept(tmp_path):
    made = tmp_path / "python"
    made.write_text("")
    command = gpu_box.Command(["false"], "env.log", unless_exists=str(made))
    assert gpu_box.run_command(command, {}, tmp_path, gpu_box.Clock(None)) == "kept"
    assert gpu_box.run_command(gpu_box.Command(["true"], "ok.log"), {}, tmp_path, gpu_box.Clock(None)) == "ok"


def test_the_table_says_when_a_reduce_first_held_20_lines(capsys):
    """From the summary's timeline, or from the progress lines of a row recorded before summaries held one."""
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks" / "scale" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    progress = (
        "  [establish] done in 53 s: 0 candidates judged, 0 accepted; 59 code lines; no candidate judged yet\n"
        "  [restructure] done in 18 s: 1 candidates judged, 1 accepted; 47 code lines; 25.9 s per candidate\n"
        "  [slice_to_failure] done in 15 s: 1 candidates judged, 1 accepted; 14 code lines; 14.2 s per candidate\n"
    )
    assert bench.timeline_from_progress(progress) == [(53.0, 59), (71.0, 47), (86.0, 14)]
    row = {"case": "c", "seconds": 90, "input_lines": 53, "output_lines": 14, "verified": True, "flags": "defaults"}
    row |= {"output_fails_same": True, "timeline": bench.timeline_from_progress(progress)}
    table = bench.tables([row, {**row, "timeline": []}]).splitlines()
    assert table[0].endswith("| 20 lines at |") and table[2].endswith("| 86 s |") and table[3].endswith("|  |")


def test_the_tables_show_the_current_defaults_first_and_earlier_versions_apart(tmp_path):
    """Rows of earlier defaults go to a table of their own after the current ones; --doc rewrites only the page's
    generated region."""
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks" / "scale" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = {"case": "now", "seconds": 90, "input_lines": 53, "output_lines": 14, "verified": True, "flags": "defaults"}
    row |= {"output_fails_same": True, "phases": [{"phase": "search", "seconds": 60, "candidates": 30, "jobs": 8}]}
    row |= {"workers": "12 run(s) in a reused worker; retired: none"}
    old = {**row, "case": "then", "flags": "defaults then: something (since changed)", "workers": ""}
    older_now = {**row, "flags": "defaults then: else (since changed)", "phases": [{**row["phases"][0], "seconds": 99}]}
    text = bench.tables([old, older_now, row])
    current, earlier = text.split("Earlier versions")
    summary = current.split("\n\n")[0]
    assert "| now |" in summary and "| then |" not in summary and "| then |" in earlier
    assert "| now |  | search | 60 | 30 | 2.0 | 8 |" in current and "12 run(s) in a reused worker" in current
    # a case with no current row shows its latest row's details; an older row of a current case does not
    assert "| then |  (then) | search | 60 |" in current and "| now |  | search | 99 |" not in current
    doc = tmp_path / "page.md"
    begin = bench.BEGIN.format(files="rows.jsonl", doc=doc.as_posix())
    doc.write_text(f"# Page\n\n{begin}\nstale\n{bench.END}\n\nprose after\n")
    bench.write_doc(doc, ["rows.jsonl"], text)
    page = doc.read_text()
    assert "stale" not in page and text in page and page.endswith(f"{bench.END}\n\nprose after\n")


def test_the_phase_table_says_how_busy_the_search_kept_its_slots():
    """A phase that recorded its runs' seconds shows the share of its slots (`jobs` for its seconds) they filled."""
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks" / "scale" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = {"case": "now", "seconds": 90, "input_lines": 53, "output_lines": 14, "verified": True, "flags": "defaults"}
    row |= {"output_fails_same": True}
    row |= {"phases": [{"phase": "guard", "seconds": 5, "candidates": 0, "jobs": 8}]}
    row["phases"].append({"phase": "search", "seconds": 60, "candidates": 30, "jobs": 8, "run_seconds": 240.0})
    text = bench.tables([row])
    assert "| now |  | search | 60 | 30 | 2.0 | 8 | 50% |" in text and "| now |  | guard | 5 | 0 |  | 8 |  |" in text


def test_a_row_is_rebuilt_from_a_run_s_log_as_far_as_the_log_holds_it():
    """A log holds the reduce's JSON summary and the summary table's row: what the tables show comes back the same;
    what only the rows file held (the output script, the original's run) is None, and `from_log` says so."""
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks" / "scale" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = {"case": "gpu-x", "env": "newest", "box": "16 cores, 1 x GPU", "flags": "defaults", "seconds": 250.4}
    row |= {"input_lines": 61, "output_lines": 10, "verified": True, "maybe_not_minimal": False, "jobs": 8}
    row |= {"output_fails_same": True, "output_in_fixed_env": "passes", "workers": "9 run(s) in a reused worker"}
    row |= {"phases": [{"phase": "search", "seconds": 87.0, "candidates": 247, "jobs": 8}], "timeline": [[114.0, 19]]}
    summary = {"input_lines": 61, "output_lines": 10, "seconds": 248.0, "jobs": 8, "maybe_not_minimal": False}
    summary |= {k: row[k] for k in ("phases", "timeline", "workers")} | {"passes": [], "notes": ["n"]}

    log = "progress\n" + json.dumps(summary) + "\n" + bench.tables([row]) + "\n"
    rebuilt = bench.row_from_log(log)
    assert rebuilt["from_log"] and rebuilt["output"] is None and rebuilt["original_run_s"] is None
    assert bench.tables([rebuilt]).splitlines()[2] == bench.tables([row]).splitlines()[2]
    assert rebuilt["seconds"] == 250.0 and rebuilt["notes"] == ["n"] and rebuilt["phases"] == row["phases"]
    flagged = {**row, "flags": "--jobs 2"}  # its row goes under "Earlier versions", after an empty current table
    log = "progress\n" + json.dumps(summary) + "\n" + bench.tables([flagged]) + "\n"
    assert bench.row_from_log(log)["flags"] == "--jobs 2"
    with pytest.raises(SystemExit, match=r"not a bench\.py log"):
        bench.row_from_log("no summary here\n")


def test_reduces_side_by_side_say_so_in_their_rows():
    args = gpu_box.parse_args(["reduce-round", "--gpus", "2", "--reduce-sets", "newest,pinned"])
    bench = [c for c in _commands(args) if "benchmarks/scale/bench.py" in c.argv]
    assert all(c.argv[c.argv.index("--box-note") + 1].startswith("one of two GPUs") for c in bench)
    alone = gpu_box.parse_args(["reduce-round", "--gpus", "1", "--reduce-sets", "newest"])
    assert not any("--box-note" in c.argv for c in _commands(alone))


def test_reduce_cases_given_with_commas_or_repeated_get_a_lane_each(capsys):
    """`--reduce-case A,B` once read as one case named "A,B", run in one lane; now it is two cases, as repeating the
    flag gives: on two GPUs, a lane each."""
    for given in (["gpu-gemma4-e4b-eval,gpu-gemma4-e4b-qlora"], ["gpu-gemma4-e4b-eval", "gpu-gemma4-e4b-qlora"]):
        argv = ["reduce-round", "--gpus", "2", "--reduce-sets", "newest"]
        out = _dry_run(capsys, *argv, *[a for case in given for a in ("--reduce-case", case)])
        lanes = [line for line in out.splitlines() if "bench.py --case" in line]
        assert len(lanes) == 2
        assert "CUDA_VISIBLE_DEVICES=0" in lanes[0] and "--case gpu-gemma4-e4b-eval " in lanes[0]
        assert "CUDA_VISIBLE_DEVICES=1" in lanes[1] and "--case gpu-gemma4-e4b-qlora " in lanes[1]
