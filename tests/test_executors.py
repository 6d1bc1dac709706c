"""Warm executors give the same answers as cold runs, one process per candidate, crashes included."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
import time

import pytest

from minrepro.errors import MinreproError
from minrepro.harness._forkserver import WORKER_NICENESS
from minrepro.harness.executors import ColdExecutor, ExecutorOptions, ForkServerExecutor, WarmPoolExecutor
from minrepro.harness import bytecode

SCRIPTS = {
    "library": "from packaging.version import Version\nVersion('x y')\n",
    "user": "raise KeyError(3)\n",
    "pass": "print('ok')\n",
    "segfault": "import ctypes\nctypes.string_at(0)\n",
    "exit": "import sys\nsys.exit(4)\n",
    # a monkeypatch must not leak into the next candidate: each runs in a fresh process
    "patch": "import packaging.version as v\nv.Version = None\nraise RuntimeError('patched')\n",
    "after-patch": "import packaging.version as v\nassert v.Version is not None\n",
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    root = tmp_path_factory.mktemp("scripts")
    paths = []
    for name, body in SCRIPTS.items():
        path = root / f"{name.replace('-', '_')}.py"
        path.write_text(body)
        paths.append(path)
    return paths


@pytest.mark.parametrize("make", [ForkServerExecutor, WarmPoolExecutor], ids=["forkserver", "warm-pool"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_warm_answers_equal_cold_answers(scripts, make, jobs):
    cold = ColdExecutor(jobs=2).run_many(scripts, 30)
    executor = make(None, ["packaging.version"], jobs)
    try:
        warm = executor.run_many(scripts, 30)
    finally:
        executor.close()
    assert [r.signature for r in warm] == [r.signature for r in cold]
    assert warm[2].signature is None and warm[-1].signature is None  # "after-patch" saw a clean module


def test_fork_server_times_out_and_keeps_serving(tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(300)\n")
    fine = tmp_path / "fine.py"
    fine.write_text("print(1)\n")
    executor = ForkServerExecutor(None, [], 1)
    try:
        timed_out, after = executor.run_many([hang, fine], 2)
    finally:
        executor.close()
    assert timed_out.signature.kind == "timeout"
    assert after.signature is None


@pytest.mark.parametrize(
    "make",
    [lambda: ColdExecutor(jobs=1), lambda: ForkServerExecutor(None, [], 1), lambda: WarmPoolExecutor(None, [], 1)],
    ids=["cold", "forkserver", "warm-pool"],
)
def test_what_one_candidate_writes_cannot_feed_the_next(tmp_path, make):
    script = tmp_path / "writes.py"
    script.write_text(
        "import os\nseen = os.path.exists('marker')\nopen('marker', 'w').close()\nraise RuntimeError(f'seen={seen}')\n"
    )
    executor = make()
    try:
        first, second = executor.run_many([script, script], 30, tmp_path)
    finally:
        executor.close()
    assert first.raw_headline == second.raw_headline == "RuntimeError: seen=False"
    assert not (tmp_path / "marker").exists()  # nothing lands in the user's directory


@pytest.mark.parametrize(
    "make, lowered",
    [
        (lambda: ColdExecutor(jobs=1), 0),
        (lambda: ForkServerExecutor(None, [], 1), WORKER_NICENESS),
        (lambda: WarmPoolExecutor(None, [], 1), WORKER_NICENESS),
    ],
    ids=["cold", "forkserver", "warm-pool"],
)
def test_warm_runs_go_below_the_cold_runs_priority(tmp_path, make, lowered):
    """Where the cores are short, the cold runs the reduction waits for go before the warm workers' imports."""
    script = tmp_path / "nice.py"
    script.write_text("import os\nraise RuntimeError(f'niceness={os.nice(0)}')\n")
    executor = make()
    try:
        (result,) = executor.run_many([script], 30, tmp_path)
    finally:
        executor.close()
    assert result.raw_headline == f"RuntimeError: niceness={min(19, os.nice(0) + lowered)}"


def test_fork_server_children_draw_fresh_random_state(tmp_path):
    # Inherited, every child would draw the same weights: a script that lost its manual_seed line would look
    # deterministic here and not reproduce cold. (random and numpy reseed themselves after a fork; torch does not.)
    pytest.importorskip("torch")
    script = tmp_path / "draw.py"
    script.write_text(
        "import string, torch\nletters = string.ascii_letters\n"
        "raise RuntimeError(''.join(letters[int(i)] for i in torch.randint(0, 52, (12,))))\n"
    )
    executor = ForkServerExecutor(None, ["torch"], 1)
    try:
        first, second = executor.run_many([script, script], 60)
    finally:
        executor.close()
    assert first.signature.message != second.signature.message


def test_fork_server_leaves_a_cuda_initializing_import_to_each_child(tmp_path, monkeypatch):
    # bitsandbytes initializes CUDA when imported on a GPU box; a forked child could not use CUDA after that, so the
    # server starts again without that preload instead of giving up on warm runs altogether
    (tmp_path / "initializes_cuda.py").write_text(
        "import sys, types\n"
        "torch = types.ModuleType('torch')\n"
        "torch.cuda = types.SimpleNamespace(is_initialized=lambda: True)\n"
        "sys.modules['torch'] = torch\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    script = tmp_path / "script.py"
    script.write_text("import initializes_cuda\nraise ValueError('ran')\n")
    executor = ForkServerExecutor(preload=["json", "initializes_cuda"])
    try:
        assert executor.skipped == ["initializes_cuda"]
        [result] = executor.run_many([script], 30)
        assert result.signature is not None and result.signature.message == "ran"
    finally:
        executor.close()


def test_candidates_sharing_a_slow_prefix_run_from_a_snapshot_of_it(tmp_path):
    # each candidate sleeps 1 s in its shared prefix; from the third on they run only their suffix, in a process
    # of their own (what one appends to `shared` is not seen by the next), and a failing prefix is replayed
    prefix = "import time\nshared = []\ntime.sleep(1)\n"
    scripts = []
    for i, suffix in enumerate(["shared.append(1)\nraise ValueError(shared)\n"] * 4 + ["raise KeyError('k')\n"]):
        path = tmp_path / f"c{i}.py"
        path.write_text(prefix + suffix)
        scripts.append(path)
    broken = tmp_path / "broken.py"
    broken.write_text("import time\nshared = []\ntime.sleep(1)\nraise OSError('in the prefix')\nx = 1\n")
    executor = ForkServerExecutor(preload=["json"])
    try:
        executor.set_heavy(["time.sleep(1)"])
        start = time.monotonic()
        results = [executor.run_many([s], 30)[0] for s in scripts]
        elapsed = time.monotonic() - start
        assert [r.signature.headline for r in results] == ["ValueError: [<num>]"] * 4 + ["KeyError: <key>"]
        assert all(r.script_lines[-1] == (5 if i < 4 else 4) for i, r in enumerate(results))
        assert executor.snapshot_runs == 4 and elapsed < 4.0  # five cold-ish runs would take over 5 s
        executor.set_heavy(["raise OSError('in the prefix')"])
        twice = [executor.run_many([broken], 30)[0] for _ in range(2)]
        assert [r.signature.headline for r in twice] == ["OSError: in the prefix"] * 2
    finally:
        executor.close()


def test_a_snapshot_after_a_parallel_torch_op_serves_its_candidates(tmp_path):
    # GNU OpenMP is not fork-safe: children forked from a prefix that ran a multi-threaded matmul hung in their first
    # one, so every snapshot-served candidate of a real script timed out and was refused
    torch = pytest.importorskip("torch")
    if torch.get_num_threads() < 2:
        pytest.skip("one intra-op thread: nothing to hang on")
    scripts = []
    for name in ("a", "b"):
        script = tmp_path / f"{name}.py"
        script.write_text(
            f"import torch\nx = torch.randn(512, 512)\ny = x @ x\nz = (y @ y).sum()\nraise ValueError('{name}')\n"
        )
        scripts.append(script)
    executor = ForkServerExecutor(None, ["torch"], 2)
    executor.set_heavy(["y = x @ x"])
    try:
        results = [r for _ in range(3) for r in executor.run_many(scripts, 30)]
    finally:
        executor.close()
    assert executor.snapshot_runs > 0  # the branch in question was reached
    assert [r.raw_headline for r in results] == ["ValueError: a", "ValueError: b"] * 3


@pytest.mark.parametrize("make", [ForkServerExecutor, WarmPoolExecutor], ids=["forkserver", "warm-pool"])
def test_a_candidates_files_go_when_its_answer_is_in_and_dead_runs_leave_nothing(tmp_path, make, monkeypatch):
    import os
    import tempfile
    from pathlib import Path

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # what a run killed from outside leaves: its pid is gone (a fresh child's, reaped), its directory is not
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"minrepro-fork-{dead.pid}-abc"
    (stale / "job" / "cwd").mkdir(parents=True)
    live = tmp_path / f"minrepro-pool-{os.getpid()}-keep"
    live.mkdir()
    writer = tmp_path / "writer.py"
    writer.write_text("open('checkpoint.bin', 'wb').write(b'x' * 1000)\n")
    executor = make(None, [], 2)
    try:
        assert not stale.exists() and live.exists()
        executor.run_many([writer] * 4, 30)
        root = Path(executor._tmp.name)
        assert not list(root.rglob("checkpoint.bin"))  # 450 saved checkpoints once filled 12 GB mid-reduction
    finally:
        executor.close()


def _through_snapshots(tmp_path, bodies: list[str], heavy: str = "time.sleep(1)"):
    """Run each body as its own script, one at a time, in a fork server told `heavy` is slow (so the second and
    later runs come from a prefix snapshot): the executor and the results."""
    scripts = []
    for i, body in enumerate(bodies):
        path = tmp_path / f"s{i}.py"
        path.write_text(body)
        scripts.append(path)
    executor = ForkServerExecutor(preload=["json"])
    try:
        executor.set_heavy([heavy])
        results = [executor.run_many([s], 30)[0] for s in scripts]
    finally:
        executor.close()
    return executor, results


def test_files_a_snapshot_prefix_wrote_outlive_the_candidate_that_built_it(tmp_path):
    # the snapshot's scratch once lived in the directory of the job that built it, which is removed when that
    # job's answer is in: every later candidate would lose the checkpoint its prefix saved
    prefix = "import os, tempfile, time\nd = tempfile.mkdtemp()\nopen(os.path.join(d, 'ckpt'), 'w').write('w')\ntime.sleep(1)\n"
    executor, results = _through_snapshots(
        tmp_path, [prefix + "raise ValueError(open(os.path.join(d, 'ckpt')).read())\n"] * 4
    )
    assert executor.snapshot_runs == 3  # the branch in question was reached
    assert [r.signature.headline for r in results] == ["ValueError: w"] * 4


@pytest.mark.parametrize(
    "make",
    [lambda: ColdExecutor(jobs=1), lambda: ForkServerExecutor(None, [], 1), lambda: WarmPoolExecutor(None, [], 1)],
    ids=["cold", "forkserver", "warm-pool"],
)
def test_what_a_run_leaves_in_its_working_directory_is_reported_and_temp_files_are_not(tmp_path, make):
    writes = tmp_path / "writes.py"
    writes.write_text("import os, tempfile\nos.makedirs('base')\ntempfile.mkdtemp()\n")
    clean = tmp_path / "clean.py"
    clean.write_text("import tempfile\nopen(tempfile.mkstemp()[1], 'w').write('x')\n")
    executor = make()
    try:
        wrote, kept = executor.run_many([writes, clean], 30, tmp_path)
    finally:
        executor.close()
    assert (wrote.cwd_writes, kept.cwd_writes) == (("base",), ())


def test_a_snapshot_prefix_that_writes_into_the_cwd_is_reported_and_its_files_read_as_cold(tmp_path):
    # the prefix runs in the snapshot's directory, the suffix in the candidate's: a relative path the prefix saved
    # must still read (as it does cold), and count as the candidate's write into its working directory
    body = "import time\nopen('base', 'w').write('w')\ntime.sleep(1)\nraise ValueError(open('base').read())\n"
    executor, results = _through_snapshots(tmp_path, [body] * 3)
    assert executor.snapshot_runs == 2
    assert [r.signature.headline for r in results] == ["ValueError: w"] * 3
    assert [r.cwd_writes for r in results] == [("base",)] * 3


def test_a_prefix_that_initializes_cuda_is_never_forked_from_and_its_candidates_run_whole(tmp_path, monkeypatch):
    # a GPU training script's heavy prefix loads the model onto the GPU: children forked from that snapshot all
    # failed with "Cannot re-initialize CUDA in forked subprocess" (520 of 605 candidates), and were refused.
    # A stand-in torch whose `cuda.init()` is what a real CUDA initialization is to the fork server.
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("from . import cuda\ndef set_num_threads(n):\n    pass\n")
    (fake / "cuda.py").write_text(
        "import os\n_pid = None\ndef init():\n    global _pid\n    _pid = os.getpid()\n"
        "def is_initialized():\n    return _pid is not None\n"
        "def use():\n    if _pid not in (None, os.getpid()):\n"
        "        raise RuntimeError('Cannot re-initialize CUDA in forked subprocess')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    executor, results = _through_snapshots(
        tmp_path,
        [
            f"import time\nimport torch\ntorch.cuda.init()\ntime.sleep(1)\ntorch.cuda.use()\nraise ValueError({i})\n"
            for i in range(3)
        ],
    )
    assert [r.raw_headline for r in results] == ["ValueError: 0", "ValueError: 1", "ValueError: 2"]
    assert executor.snapshots_refused == "cuda" and executor.snapshot_runs == 0


@pytest.mark.parametrize("make", [ForkServerExecutor, WarmPoolExecutor], ids=["forkserver", "warm-pool"])
def test_what_a_run_imported_lazily_is_preloaded(tmp_path, make):
    # transformers imports bitsandbytes at the first quantized load: preloaded only with the script's own imports,
    # every forked child paid for it again (2 of a tiny script's 2.2 s)
    script = tmp_path / "lazy.py"
    script.write_text(
        "import sys\nalready = 'packaging.specifiers' in sys.modules\n"
        "def later():\n    import packaging.specifiers\nlater()\nraise RuntimeError(f'{already}')\n"
    )
    cold = ColdExecutor().run_many([script], 30)[0]
    assert "packaging.specifiers" in cold.modules and cold.raw_headline == "RuntimeError: False"
    executor = make(None, ["sys"], 1, ExecutorOptions(recorded=cold.modules))
    try:
        warm = executor.run_many([script], 30)[0]
    finally:
        executor.close()
    assert warm.raw_headline == "RuntimeError: True"


def test_warm_profile_equals_cold_profile(tmp_path):
    script = tmp_path / "prof.py"
    script.write_text("import time\nx = 1\nif x:\n    time.sleep(0.2)\nraise KeyError(x)\n")
    profiles = []
    for make in (lambda: ColdExecutor(), lambda: ForkServerExecutor(None, [], 1)):
        executor, out = make(), tmp_path / f"p{len(profiles)}.json"
        try:
            run = executor.profile(script, out, 30, tmp_path)
        finally:
            executor.close()
        assert run.raw_headline == "KeyError: 1"
        profiles.append(json.loads(out.read_text()))
    assert [sorted(p["line_seconds"]) for p in profiles] == [["1", "2", "3", "4", "5"]] * 2
    assert all(p["line_seconds"]["4"] >= 0.2 for p in profiles)


def _stand_in_cuda_site(root: Path) -> Path:
    """A torch whose `cuda._lazy_init` is what a real CUDA initialization is to the fork server, a library that
    initializes it at import (as bitsandbytes does on a GPU box), one that does so around `_lazy_init`, and
    packages that import them or nothing heavy."""
    site = root / "site"
    files = {
        "torch/__init__.py": "from . import cuda\ndef set_num_threads(n):\n    pass\ndef seed():\n    pass\n",
        "torch/cuda.py": "import os\n_pid = None\ndef _lazy_init():\n    global _pid\n    _pid = os.getpid()\n"
        "def is_initialized():\n    return _pid is not None\ndef is_available():\n    return True\n",
        "gpulib/__init__.py": "import torch\ntorch.cuda._lazy_init()\n",
        "gpulib/nn.py": "X = 1\n",
        "usesgpu.py": "import gpulib\n",
        "sneaky.py": "import os, torch\ntorch.cuda._pid = os.getpid()\n",
        "plain.py": "VALUE = 1\n",
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return site


def _gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "\nState:\tZ" in status.read_text()


def test_preloads_that_initialize_cuda_are_left_to_each_run_in_one_start(tmp_path, monkeypatch):
    # on an H100 the newest set's catalog restarted the server once per such preload (bitsandbytes, then peft,
    # then peft.utils): 4 starts, 58 s of a 68 s phase. A trial import per name finds them all in one start.
    monkeypatch.setenv("PYTHONPATH", str(_stand_in_cuda_site(tmp_path)))
    script = tmp_path / "s.py"
    script.write_text(
        "import sys\nloaded = [m for m in ('plain', 'gpulib', 'usesgpu') if m in sys.modules]\n"
        "import usesgpu\nraise RuntimeError(loaded)\n"
    )
    executor = ForkServerExecutor(None, ["gpulib", "usesgpu", "gpulib.nn", "plain", "torch"], 1)
    try:
        [run] = executor.run_many([script], 30)
    finally:
        executor.close()
    assert run.raw_headline == "RuntimeError: ['plain']"
    assert len(executor.starts) == 1 and executor.starts[0].cuda_by is None
    assert executor.skipped == ["gpulib", "usesgpu", "gpulib.nn"]
    assert set(executor.starts[0].refused.values()) == {"gpulib"}
    assert _gone(executor.server_pid)


def test_cuda_initialized_around_the_trial_still_restarts_the_server_without_that_preload(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(_stand_in_cuda_site(tmp_path)))
    script = tmp_path / "s.py"
    script.write_text("import sys\nraise RuntimeError(sorted(m for m in ('plain', 'sneaky') if m in sys.modules))\n")
    executor = ForkServerExecutor(None, ["torch", "sneaky", "plain"], 1)
    try:
        [run] = executor.run_many([script], 30)
    finally:
        executor.close()
    assert run.raw_headline == "RuntimeError: ['plain']"
    assert [start.cuda_by for start in executor.starts] == ["sneaky", None] and executor.skipped == ["sneaky"]


def test_a_server_that_dies_while_preloading_says_why(tmp_path, monkeypatch):
    # on an H100 every spec reduction's server "exited unexpectedly", and its log went with its scratch directory
    (tmp_path / "dies.py").write_text(
        "import os, sys\nsys.stderr.write('dying here\\n')\nsys.stderr.flush()\nos._exit(3)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(MinreproError, match="exited unexpectedly; its log ends: dying here"):
        ForkServerExecutor(None, ["dies"], 1)


def test_a_candidate_never_sees_what_another_wrote_into_their_shared_prefix_files(tmp_path):
    # a suffix that saved an adapter into the prefix's temp dir handed it to every later candidate: one that no
    # longer saves it still loaded it there (never cold), and the reduction's final cold check refused the result
    prefix = "import os, tempfile, time\nd = tempfile.mkdtemp()\ntime.sleep(1)\n"
    writes = prefix + "open(os.path.join(d, 'adapter'), 'w').write('a')\nraise ValueError('saved')\n"
    reads = prefix + "raise ValueError(os.path.exists(os.path.join(d, 'adapter')))\n"
    executor, results = _through_snapshots(tmp_path, [writes, writes, reads, reads])
    assert [r.raw_headline for r in results] == [
        "ValueError: saved",
        "ValueError: saved",
        "ValueError: False",
        "ValueError: False",
    ]
    assert executor.refused_prefixes  # the branch in question: a child changed the snapshot's files


@pytest.mark.parametrize(
    "make", [lambda jobs: ColdExecutor(jobs=jobs), lambda jobs: ForkServerExecutor(None, [], jobs)]
)
def test_runs_side_by_side_share_the_cores_and_a_users_own_cap_stays(tmp_path, monkeypatch, make):
    """Each of `jobs` runs at once gets cores // jobs intra-op threads (torch's default of one per core in every
    process oversubscribes the CPU); a lone run and a user's own OMP_NUM_THREADS are left as they are."""
    import os

    script = tmp_path / "threads.py"
    script.write_text("import os\nprint(os.environ.get('OMP_NUM_THREADS', 'unset'))\n")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))

    def seen(jobs: int) -> str:
        executor = make(jobs)
        try:
            return executor.run_many([script], 30)[0].stdout.strip()
        finally:
            executor.close()

    assert seen(1) == "unset"
    assert seen(2) == str(max(1, cores // 2))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert seen(2) == "3"


def test_a_shared_prefix_that_runs_past_the_timeout_is_given_up_and_its_candidates_run_whole(tmp_path):
    """A snapshot's prefix ran with no timeout: its candidates wait for it with no process of their own to expire.
    A candidate that dropped a twin's config built the full-size model in the prefix for 345 s under a 5 s timeout.
    Now the prefix stops at the timeout and its candidates are handed back, each timed out as a cold run would be."""
    scripts = []
    for i in range(3):
        path = tmp_path / f"c{i}.py"
        path.write_text(f"import time\ntime.sleep(30)\nraise ValueError({i})\n")
        scripts.append(path)
    executor = ForkServerExecutor(preload=["json"])
    try:
        executor.set_heavy(["time.sleep(30)"])
        start = time.monotonic()
        results = [executor.run_many([s], 1.0)[0] for s in scripts]
        assert time.monotonic() - start < 15  # not 30 s in the prefix
        assert [r.signature.kind for r in results] == ["timeout"] * 3
        assert executor.refused_prefixes and executor.snapshot_runs == 0 and not executor.snapshots_refused
    finally:
        executor.close()


@pytest.mark.parametrize(
    "cuda, left, expected",
    [(False, [], "forkserver"), (False, ["peft"], "warm-pool"), (False, None, "warm-pool"), (True, [], "warm-pool")],
)
def test_auto_takes_the_warm_pool_where_cuda_is_visible_or_the_fork_server_cannot_serve(
    monkeypatch, cuda, left, expected
):
    """Where CUDA is visible the warm pool, without starting a fork server (its snapshots stop at CUDA's
    initialization, and its children were slower on two H200s). Elsewhere the fork server, with its prefix snapshots,
    unless it would leave a CUDA-initializing import to every child (closed, then the pool) or cannot start."""
    from minrepro.harness import executors

    started: list[str] = []
    closed: list[str] = []

    class Server:
        name = "forkserver"

        def __init__(self, python, preload, jobs, options):
            started.append(self.name)
            if left is None:
                raise MinreproError("CUDA was initialized while preloading; a fork server cannot be used")
            self.skipped = list(left)

        def close(self):
            closed.append(self.name)

    class Pool:
        name = "warm-pool"

        def __init__(self, python, preload, jobs, options=None):
            self.chosen_because = ""

    probed: list[str] = []
    monkeypatch.setattr(executors, "_cuda_visible_in", lambda python: probed.append(python) or cuda)
    monkeypatch.setattr(executors, "ForkServerExecutor", Server)
    monkeypatch.setattr(executors, "WarmPoolExecutor", Pool)
    told = executors.make_executor("auto", None, ["torch"], 2, executors.ExecutorOptions(cuda=cuda))
    assert told.name == expected and probed == []  # the caller's probe answered: no second torch import
    started.clear(), closed.clear()
    chosen = executors.make_executor("auto", None, ["torch"], 2)
    assert chosen.name == expected and len(probed) == 1
    assert started == ([] if cuda else ["forkserver"])
    assert closed == (["forkserver"] if left else [])
    if cuda:
        assert "CUDA is visible" in chosen.chosen_because
    if left:
        assert "peft" in chosen.chosen_because and "CUDA" in chosen.chosen_because
    if left is None:  # a server that cannot start at all: the pool, not cold runs
        assert "could not start" in chosen.chosen_because


def test_cuda_visibility_is_not_probed_without_the_nvidia_driver(monkeypatch):
    """A CPU box (no /dev/nvidiactl, no /proc/driver/nvidia) answers at once: no interpreter is started."""
    from minrepro.harness import executors

    monkeypatch.setattr(executors.Path, "exists", lambda self: False)
    monkeypatch.setattr(executors, "probe", lambda python: pytest.fail("probed"))
    assert executors._cuda_visible_in(sys.executable) is False


@pytest.mark.parametrize("answer, expected", [(True, True), (False, False), (MinreproError("cannot probe"), False)])
def test_cuda_visibility_is_the_envs_probe_where_the_driver_is(monkeypatch, answer, expected):
    """With the NVIDIA driver present, the env's own probe says (the env's torch may be a CPU build, or see none)."""
    from types import SimpleNamespace

    from minrepro.harness import executors

    def probe(python):
        if isinstance(answer, Exception):
            raise answer
        return SimpleNamespace(cuda=answer)

    monkeypatch.setattr(executors.Path, "exists", lambda self: True)
    monkeypatch.setattr(executors, "probe", probe)
    assert executors._cuda_visible_in(sys.executable) is expected


BYTECODE_PROBE = (
    "import sys\nsys.path.insert(0, {lib!r})\nimport helper_mod\n"
    "raise RuntimeError(f'off={{sys.flags.dont_write_bytecode}} prefix={{sys.pycache_prefix}}')\n"
)


@pytest.mark.parametrize(
    "make",
    [lambda: ColdExecutor(jobs=1), lambda: ForkServerExecutor(None, [], 1), lambda: WarmPoolExecutor(None, [], 1)],
    ids=["cold", "forkserver", "warm-pool"],
)
@pytest.mark.parametrize(
    "turned_off, installed_without",
    [(True, True), (True, False), (False, True)],
    ids=["off-installed-without", "off-installed-with", "on"],
)
def test_a_run_keeps_its_bytecode_in_the_cache_where_the_environment_turns_it_off_and_installs_lack_it(
    tmp_path, monkeypatch, make, turned_off, installed_without
):
    """Container images set PYTHONDONTWRITEBYTECODE, and uv installs without bytecode: each run would compile every
    module it imports from source again. Its bytecode goes under minrepro's cache instead, never beside the sources;
    elsewhere nothing changes (where the installs carry their bytecode, a prefix would only compile them again)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("MINREPRO_CACHE", str(cache))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(bytecode, "installed_without_bytecode", lambda *_: installed_without)
    if turned_off:
        monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    else:
        monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper_mod.py").write_text("VALUE = 3\n")
    script = tmp_path / "uses.py"
    script.write_text(BYTECODE_PROBE.format(lib=str(lib)))
    executor = make()
    try:
        (result,) = executor.run_many([script], 30, tmp_path)
    finally:
        executor.close()
    kept = list((cache / "pycache").rglob("helper_mod*.pyc"))
    beside = list((lib / "__pycache__").glob("helper_mod*.pyc"))
    if turned_off and installed_without:
        assert result.raw_headline == f"RuntimeError: off=0 prefix={cache / 'pycache'}"
        assert kept and not beside
    elif turned_off:
        assert result.raw_headline == "RuntimeError: off=1 prefix=None"
        assert not kept and not beside
    else:
        assert result.raw_headline == "RuntimeError: off=0 prefix=None"
        assert not kept and beside


def test_a_bytecode_prefix_the_user_chose_is_theirs(monkeypatch):
    monkeypatch.setattr(bytecode, "installed_without_bytecode", lambda *_: True)
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/theirs", "HOME": "/h"}
    assert bytecode.child_environ(environ, sys.executable) == environ
    unset = {"PYTHONDONTWRITEBYTECODE": "", "A": "b"}
    assert bytecode.child_environ(unset, sys.executable) == unset


def test_a_library_installed_without_bytecode_is_found_without_importing_it(tmp_path, monkeypatch):
    import py_compile

    site = tmp_path / "site"
    (site / "fakeheavy").mkdir(parents=True)
    init = site / "fakeheavy" / "__init__.py"
    init.write_text("raise SystemExit('imported')\n")  # located, never imported
    monkeypatch.setattr(bytecode, "HEAVY", ("fakeheavy", "no_such_library"))
    assert bytecode.keeps_bytecode({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(site)}, sys.executable)
    assert not bytecode.keeps_bytecode({"PYTHONDONTWRITEBYTECODE": "1"}, sys.executable)  # another PYTHONPATH
    py_compile.compile(
        str(init), cfile=str(site / "fakeheavy" / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc")
    )
    bytecode.installed_without_bytecode.cache_clear()
    assert not bytecode.installed_without_bytecode(sys.executable, str(site))


def test_a_venv_s_lib64_name_is_dropped_from_the_bytecode_cache_too(tmp_path, bytecode_kept):
    """Fedora's and RHEL's system Pythons import a venv's packages as `lib64/...` (a link to `lib`)."""
    from minrepro.dirs import bytecode_mirrors

    site = tmp_path / "env" / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    (tmp_path / "env" / "lib64").symlink_to("lib")
    lib64 = tmp_path / "env" / "lib64" / "python3" / "site-packages" / "peft"
    assert bytecode_kept / lib64.relative_to("/") in bytecode_mirrors(site / "peft")
