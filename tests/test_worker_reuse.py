"""A reused warm worker answers as a fresh interpreter would: what a run changed is put back, or the worker retires.

Reuse is what makes a warm pool pay off on a GPU box (a worker's imports cost 15-20 s there, a twin's run 2 s), so
these tests compare a reusing pool with one whose workers each run one candidate, on scripts that change the
process's state."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minrepro.cli import main
from minrepro.harness.executors import REUSE_SPARES, ColdExecutor, ExecutorOptions, WarmPoolExecutor
from minrepro.reducers.source import patches_imports
from minrepro.harness.runner import Signature
from minrepro.reduction import workers

# what a run sees of the state an earlier run in the same process could have left, printed first by every script
OBSERVE = """\
import logging, os, random, sys, warnings
print('env', os.environ.get('MR_X'), 'path', len(sys.path), 'argv', sys.argv[1:], 'helper', 'mr_helper' in sys.modules)
print('warnings', len(warnings.filters), 'levels', logging.getLogger('mrlib').level, logging.root.level,
      len(logging.root.handlers), 'recursion', sys.getrecursionlimit(), 'cwd', os.listdir('.'),
      'seeded', random.random() == random.Random(0).random(), 'umask', os.umask(0o22))
import gc
print('gc', gc.isenabled(), gc.get_threshold())
"""

# each changes what the next run in the same process would see; the last two end the run with a failure
CHANGES = [
    "os.environ['MR_X'] = '1'",
    "sys.path.append('/nowhere')",
    "sys.argv.append('extra')",
    "import mr_helper",
    "warnings.simplefilter('ignore')",
    "logging.getLogger('mrlib').setLevel(40)",
    "logging.basicConfig()",
    "logging.disable(30)",
    "sys.setrecursionlimit(4321)",
    "open('written.txt', 'w').write('x')",
    "random.seed(0)",
    "os.umask(0o77)",
    "import threading, time; threading.Thread(target=time.sleep, args=(0.2,)).start()",
    # a daemon thread that would print into the next run's files, had its worker gone on
    "import threading, time; threading.Thread(target=lambda: time.sleep(2) or print('tick'), daemon=True).start()",
    "import io; print('before the swap'); sys.stdout = io.StringIO()",
    "gc.disable(); gc.set_threshold(5)",
    "import atexit; atexit.register(lambda: None)",
    "import signal; signal.signal(signal.SIGUSR2, lambda *a: None)",
    "raise ValueError('boom')",
    "sys.exit(3)",
]


def _write_scripts(root: Path, bodies: list[list[int]]) -> list[Path]:
    (root / "mr_helper.py").write_text("print('helper imported')\n")
    paths = []
    for n, changes in enumerate(bodies):
        path = root / f"s{n}.py"
        path.write_text(OBSERVE + "".join(CHANGES[c] + "\n" for c in changes))
        paths.append(path)
    return paths


def _answers(results) -> list[tuple]:
    return [(r.returncode, r.stdout, r.signature) for r in results]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, len(CHANGES) - 1), max_size=4), min_size=2, max_size=6))
def test_a_reusing_pool_answers_as_fresh_workers_do_whatever_the_runs_before_changed(tmp_path_factory, bodies):
    root = tmp_path_factory.mktemp("reuse")
    scripts = _write_scripts(root, bodies)
    answers = []
    unbuffered = os.environ.pop("PYTHONUNBUFFERED", None)  # a run's buffered output must still land in its own files
    try:
        for reuse in (False, True):
            pool = WarmPoolExecutor(None, ["logging", "json"], 1, ExecutorOptions(spares=1, reuse=reuse))
            try:
                answers.append(_answers(pool.run_many(scripts, 30)))
            finally:
                pool.close()
    finally:
        if unbuffered is not None:
            os.environ["PYTHONUNBUFFERED"] = unbuffered
    assert answers[1] == answers[0]


def test_a_kept_worker_runs_the_next_candidate_and_a_retired_one_is_replaced(tmp_path):
    """The same process serves run after run while each leaves it fresh; a thread still running retires it."""
    scripts = _write_scripts(tmp_path, [[0], [3], [12], [0]])
    for path in scripts:
        path.write_text(path.read_text() + "print('pid', os.getpid())\n")
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=1, reuse=True))
    try:
        results = pool.run_many(scripts, 30)
    finally:
        pool.close()
    pids = [r.stdout.split("pid ")[-1].strip() for r in results]
    assert pids[0] == pids[1] == pids[2] != pids[3]  # the thread's run was the worker's last
    assert "helper imported" in results[1].stdout
    assert pool.reused == 2 and sum(pool.retired.values()) == 1
    assert next(iter(pool.retired)).startswith("a thread still running (Thread-")
    assert "2 run(s) in a reused worker" in pool.describe_reuse()


def test_without_reuse_every_run_has_a_worker_of_its_own(tmp_path):
    scripts = [tmp_path / f"s{n}.py" for n in range(3)]
    for path in scripts:
        path.write_text("import os\nprint(os.getpid())\n")
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=1))
    try:
        results = pool.run_many(scripts, 30)
    finally:
        pool.close()
    assert len({r.stdout for r in results}) == 3 and pool.reused == 0
    assert pool.describe_reuse() == "workers not reused"


def test_a_reused_worker_killed_at_the_timeout_is_replaced_and_the_pool_serves_on(tmp_path):
    fine, hang = tmp_path / "fine.py", tmp_path / "hang.py"
    fine.write_text("print('ok')\n")
    hang.write_text("import time\ntime.sleep(300)\n")
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=1, reuse=True))
    try:
        first, timed_out, after = pool.run_many([fine, hang, fine], 2)
    finally:
        pool.close()
    assert first.signature is None and after.signature is None
    assert timed_out.signature.kind == "timeout"
    assert pool.retired == {"a crash or the timeout": 1}


@pytest.mark.parametrize(
    "source, patch",
    [
        ("import torch\ntorch.nn.Linear.forward = None\n", "torch.nn.Linear.forward = None"),
        ("from transformers import modeling_utils as mu\nmu.X = 1\n", "mu.X = 1"),
        ("import json\nsetattr(json, 'dumps', print)\n", "setattr(json, 'dumps', print)"),
        ("import json\ndel json.dumps\n", "del json.dumps"),
        ("import json\njson.cache['k'] += 1\n", "json.cache['k'] += 1"),
        ("import a, b\nx, b.y = 1, 2\n", "x, b.y = (1, 2)"),
        ("def f():\n    import peft\n    peft.X = 1\n", "peft.X = 1"),
        ("type(model).forward = f\n", "type(model).forward = f"),
        ("model.__class__.forward = f\n", "model.__class__.forward = f"),
        ("import transformers\nmll = transformers.models.llama.modeling_llama\nmll.X = 1\n", "mll.X = 1"),
        ("from unittest import mock\n", "imports mock"),
        ("import unittest.mock\n", "imports mock"),
        (
            "import torch\ntorch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False\n",
            "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False",
        ),
    ],
)
def test_a_script_that_patches_an_imported_module_is_named(source, patch):
    assert patches_imports(source) == patch


@pytest.mark.parametrize(
    "source",
    [
        "import os, sys\nos.environ['A'] = '1'\nsys.argv = ['x']\nsys.path.insert(0, 'p')\n",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",  # compared by the worker, which retires
        "import torch\nmodel = torch.nn.Linear(1, 1)\nmodel.weight.data[0] = 1\nmodel.config = None\n",
        "import torch\nx = {}\nx[torch.float16] = 1\n",
        "import sys\nsys.stdout = open('log.txt', 'w')\n",
        "import torch\ndtype = torch.bfloat16\nmodel = torch.nn.Linear(1, 1).to(dtype)\nmodel.x = 1\n",
        "tokenizer.pad_token = tokenizer.eos_token\nmodel.config.use_cache = False\n",
    ],
)
def test_a_script_that_only_changes_its_own_objects_or_what_the_worker_puts_back_is_not_a_patch(source):
    assert patches_imports(source) == ""


def test_a_patch_in_a_module_the_script_imports_from_its_directory_is_named(tmp_path):
    (tmp_path / "helpers.py").write_text("import transformers\ntransformers.X = 1\n")
    assert patches_imports("import helpers\n", tmp_path) == "transformers.X = 1 (in helpers.py)"
    assert patches_imports("import helpers\n") == ""  # without its directory, nothing to read


def _kept_back(pool: WarmPoolExecutor) -> None:
    """Wait until every worker that answered has said whether it stays (each puts its run back after answering)."""
    deadline = time.monotonic() + 30
    while pool._restoring and time.monotonic() < deadline:
        pool._poll_restoring()
        time.sleep(0.01)


def test_a_worker_that_died_while_idle_is_replaced_and_fresh_runs_get_unused_workers(tmp_path):
    script = tmp_path / "pid.py"
    script.write_text("import os\nprint(os.getpid())\n")
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=1, reuse=True))
    try:
        fresh = [r.stdout for r in pool.run_fresh([script, script], 30)]
        assert fresh[0] != fresh[1] and pool.reused == 0  # one at a time, yet two workers
        _kept_back(pool)
        kept = pool._idle[0]
        os.kill(kept.proc.pid, signal.SIGKILL)
        kept.proc.wait()
        after = pool.run_many([script], 30)[0]
    finally:
        pool.close()
    assert after.signature is None and after.stdout.strip() != str(kept.proc.pid)  # the other kept worker served
    assert pool.retired["its process ended while idle"] == 1


def test_the_reuse_check_where_the_bug_is_fixed_runs_fresh_workers_first(tmp_path):
    """In the good env the subject passes; a reused worker that fails there sends the pool back to a worker per
    candidate, with a note that names the env."""
    script = tmp_path / "job.py"
    script.write_text(
        "import json\nif json.__dict__.setdefault('seen', 0):\n    raise SystemExit('second run')\n"
        "json.__dict__.update(seen=1)\n"
    )
    pool = WarmPoolExecutor(None, ["json"], 2, ExecutorOptions(reuse=True))
    notes: list[str] = []
    executor, runs = workers.reuse_agrees(
        pool, workers.Subject(script, 30), None, notes, workers.ReuseCheck("guard env X: ", fresh_first=True)
    )
    try:
        assert executor is pool and not executor.reuse and len(runs) == 4
        assert [r.signature for r in runs[:2]] == [None, None]
        assert notes == [
            "guard env X: warm pool: workers run one candidate each (in a reused worker the script gives "
            "[SystemExit: second run])"
        ] or notes[0].startswith("guard env X: warm pool: workers run one")
    finally:
        executor.close()


def test_the_warm_check_falls_back_to_one_run_per_worker_where_a_reused_worker_disagrees(tmp_path):
    """A library's own state (here json's module dict, changed through a call) can survive a run: the script then
    answers otherwise in a reused worker, and the pool goes on with a worker per candidate."""
    script = tmp_path / "job.py"
    script.write_text(
        "import json\nif json.__dict__.setdefault('seen', 0):\n    raise SystemExit('second run')\n"
        "json.__dict__.update(seen=1)\nraise KeyError('bug')\n"
    )
    original = ColdExecutor().run_many([script], 30)[0].signature
    assert isinstance(original, Signature) and "KeyError" in original.headline
    pool = WarmPoolExecutor(None, ["json"], 2, ExecutorOptions(spares=1, reuse=True))
    notes: list[str] = []
    executor, seconds = workers.warm_executor(pool, original, workers.Subject(script, 30), notes, lambda _: None)
    try:
        assert executor is pool and not executor.reuse
        assert seconds is not None and any("one candidate each" in note for note in notes)
        # a worker that ran the script is let go: the next runs see what fresh workers see
        assert [r.signature for r in executor.run_many([script] * 3, 30)] == [original] * 3
        assert executor.describe_reuse().startswith("workers not reused (after ")
    finally:
        executor.close()


def test_a_subject_whose_run_is_slow_gets_a_worker_per_candidate_unchecked(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("print('ok')\n")
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=1, reuse=True))
    notes: list[str] = []
    try:
        executor, runs = workers.reuse_agrees(
            pool, workers.Subject(script, 30), None, notes, workers.ReuseCheck(seconds=45.0)
        )
        assert executor is pool and not pool.reuse and runs == []
        assert notes == ["warm pool: workers run one candidate each (a run took 45 s)"]
        assert pool.run_many([script], 30)[0].signature is None
    finally:
        pool.close()


def test_a_reduction_reuses_its_warm_workers_and_says_so_and_fresh_workers_turns_it_off(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("import json\na = 1\nb = 2\nc = json.dumps(a)\nd = {}\nprint(b)\nd['missing']\n")
    outputs = []
    for extra in ([], ["--fresh-workers"]):
        argv = ["reduce", str(script), "--workdir", str(tmp_path / f"w{len(extra)}"), "--executor", "warm-pool"]
        argv += ["--guard", "none", "--json", "--jobs", "2", "--out", str(tmp_path / f"out{len(extra)}.py"), *extra]
        assert main(argv) == 0
        printed = capsys.readouterr().out.strip().splitlines()
        summary = json.loads(printed[-1])
        assert f"warm pool: {summary['workers']}" in printed  # the summary says what reuse did
        outputs.append(Path(summary["output"]).read_text().split("\n\n", 1)[-1])
        if extra:
            assert summary["workers"] == "workers not reused"
        else:
            assert summary["workers"].startswith(tuple(f"{n} run" for n in range(1, 1000)))
    assert outputs[0] == outputs[1]


@pytest.mark.libs
def test_torch_switches_a_run_set_are_put_back_or_retire_the_worker(tmp_path):
    """dtype, grad mode and the thread count have plain setters and are put back; a backends switch retires the
    worker. Each run prints what it found first, as a fresh worker would have it."""
    observe = (
        "import os, torch\nprint(torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),"
        " torch.backends.cudnn.benchmark, os.getpid())\n"
    )
    changes = [
        "torch.set_default_dtype(torch.float64)\ntorch.set_grad_enabled(False)\ntorch.set_num_threads(1)\n",
        "torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark\n",
        "",
    ]
    scripts = []
    for n, change in enumerate(changes):
        scripts.append(tmp_path / f"s{n}.py")
        scripts[-1].write_text(observe + change)
    answers = []
    for reuse in (False, True):
        pool = WarmPoolExecutor(None, ["torch"], 1, ExecutorOptions(spares=1, reuse=reuse))
        try:
            answers.append([r.stdout.rsplit(" ", 1) for r in pool.run_many(scripts, 60)])
        finally:
            pool.close()
    assert [seen for seen, _ in answers[1]] == [seen for seen, _ in answers[0]]
    pids = [pid for _, pid in answers[1]]
    assert pids[0] == pids[1] != pids[2]
    assert pool.retired == {"backends": 1}


@pytest.mark.gpu
def test_a_run_that_leaves_gpu_memory_held_beyond_the_allowance_retires_its_worker(tmp_path):
    """A library cache of a few bytes on the GPU (bitsandbytes' quantization map) keeps the worker; 128 MiB kept
    alive by a module outside the run retires it."""
    small, large = tmp_path / "small.py", tmp_path / "large.py"
    small.write_text("import json, torch\njson.__dict__.setdefault('small', torch.zeros(256, device='cuda'))\n")
    large.write_text("import json, torch\njson.__dict__.setdefault('large', torch.zeros(2**25, device='cuda'))\n")
    pool = WarmPoolExecutor(None, ["torch"], 1, ExecutorOptions(spares=1, reuse=True))
    try:
        pool.run_many([small, small, large], 60)
        pool.describe_reuse()  # the last run's put-back said whether its worker stays
    finally:
        pool.close()
    assert pool.reused == 2 and list(pool.retired) == ["GPU memory still held (128 MiB)"]


@pytest.mark.parametrize("executor", ["warm-pool", "forkserver"])
def test_a_script_that_patches_a_library_gets_a_worker_per_candidate_and_a_note_where_workers_are_warm(
    tmp_path, capsys, executor
):
    script = tmp_path / "job.py"
    script.write_text("import json\njson.dumps = None\na = 1\nd = {}\nd['missing']\n")
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", executor, "--guard", "none"]
    assert main([*argv, "--json", "--jobs", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    noted = [n for n in summary["notes"] if n.startswith("a warm worker runs one candidate")]
    if executor == "warm-pool":
        assert summary["workers"] == "workers not reused" and noted == [
            "a warm worker runs one candidate: the script patches what would outlive a run (json.dumps = None)"
        ]
    else:
        assert noted == []


def test_a_reusing_pool_warms_only_reuse_spares_until_reuse_stops():
    """With reuse, REUSE_SPARES spares warm; once reuse stops, the pool holds every spare asked for."""
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=5, reuse=True))
    try:
        assert len(pool._idle) == 1 + REUSE_SPARES
        pool.stop_reuse()
        assert len(pool._idle) == 1 + 5
        assert pool.spares == 5
    finally:
        pool.close()


def test_a_pool_without_reuse_warms_every_spare():
    """Without reuse, all the spares asked for warm from the start."""
    pool = WarmPoolExecutor(None, ["json"], 1, ExecutorOptions(spares=5))
    try:
        assert len(pool._idle) == 1 + 5
    finally:
        pool.close()


# a worker that speaks the reuse protocol with a slow put-back: it answers at once, says whether it stays a second later
SLOW_PUT_BACK = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    print(json.dumps({"code": 0, "answered": True}), flush=True)
    time.sleep(1.0)
    print(json.dumps({"kept": KEPT, "why": WHY}), flush=True)
    if not KEPT:
        break
"""


def _slow_put_back_pool(tmp_path, monkeypatch, kept: bool, spares: int = 0, jobs: int = 1) -> WarmPoolExecutor:
    import subprocess
    import sys

    import minrepro.harness.executors as executors

    fake = tmp_path / "worker.py"
    fake.write_text(SLOW_PUT_BACK.replace("KEPT", repr(kept)).replace("WHY", repr("" if kept else "a thread")))

    def start(python, mode, preload, log, jobs):
        return subprocess.Popen(
            [sys.executable, str(fake)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )

    monkeypatch.setattr(executors, "_start_worker", start)
    return WarmPoolExecutor(None, [], jobs, ExecutorOptions(spares=spares, reuse=True))


def test_a_reused_worker_answers_before_it_puts_its_run_back(tmp_path, monkeypatch):
    """A run's answer (and its time) comes when the run ends, not once the worker has put it back; with `jobs`
    workers holding a run (one running or putting its run back), the next run waits for the put-back rather than take
    a spare, and runs in the same worker."""
    script = tmp_path / "job.py"
    script.write_text("pass\n")
    pool = _slow_put_back_pool(tmp_path, monkeypatch, kept=True, spares=1)
    try:
        began = time.monotonic()
        first = pool.run_many([script], 30)[0]
        answered = time.monotonic() - began
        second = pool.run_many([script], 30)[0]
        both = time.monotonic() - began
    finally:
        pool.close()
    assert first.returncode == 0 and second.returncode == 0
    assert answered < 0.9 and first.seconds < 0.9  # the put-back's second is not the run's
    assert both >= 1.0 and pool.reused == 1  # one worker: the second run waited for its put-back, then reused it


def test_a_worker_let_go_after_its_put_back_is_replaced(tmp_path, monkeypatch):
    """Where the put-back finds what it cannot undo, the worker is let go and replaced, and says why; what the pool
    says of reuse waits for the last put-back."""
    script = tmp_path / "job.py"
    script.write_text("pass\n")
    pool = _slow_put_back_pool(tmp_path, monkeypatch, kept=False)
    try:
        runs = [pool.run_many([script], 30)[0] for _ in range(2)]
        said = pool.describe_reuse()
    finally:
        pool.close()
    assert [run.returncode for run in runs] == [0, 0]
    assert pool.reused == 0 and pool.retired["a thread"] == 2 and "a thread 2" in said


def test_the_reuse_check_waits_for_a_worker_that_ran_rather_than_a_spare(tmp_path, monkeypatch):
    """A run in any worker takes a ready spare over one still putting its run back; the reuse check's runs wait for
    the worker that ran (the check is of reused workers)."""
    script = tmp_path / "job.py"
    script.write_text("pass\n")
    pool = _slow_put_back_pool(tmp_path, monkeypatch, kept=True, spares=1, jobs=2)
    try:
        for worker in pool._idle:
            worker.ready = worker.ready or any("ready" in r for r in worker.lines.read(5))
        pool.run_fresh([script], 30)
        began = time.monotonic()
        pool.run_many([script], 30)  # the spare, at once
        at_once = time.monotonic() - began
        pool.run_reused([script], 30)  # a worker that ran: waits for a put-back
        waited = time.monotonic() - began
    finally:
        pool.close()
    assert at_once < 0.9 and waited >= 0.9 and pool.reused == 1


def test_a_warm_worker_s_imports_are_frozen_out_of_every_collection(tmp_path):
    """What a worker imported is never walked by the collector again (`gc.freeze`): the put-back after each reused run
    collects what the runs made, not the libraries."""
    script = tmp_path / "s.py"
    script.write_text("import gc\nprint(gc.get_freeze_count() > 0, len(gc.get_objects(generation=2)) < 10**5)\n")
    pool = WarmPoolExecutor(None, ["json", "email.message"], 1, ExecutorOptions(reuse=True))
    try:
        runs = pool.run_many([script, script], 60)
    finally:
        pool.close()
    assert [r.stdout.split() for r in runs] == [["True", "True"]] * 2 and pool.reused == 1
