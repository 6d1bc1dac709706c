"""`minrepro reduce` end to end on small scripts whose failure passes through an installed library
(`packaging`), so no heavy libraries are needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from minrepro.cli import main
from minrepro.harness.runner import run_script
from minrepro.reducers import SearchSettings

DECOY = '''\
"""A user script with noise around one library failure, and a decoy."""
import argparse
import logging
import os
from packaging.version import InvalidVersion, Version

log = logging.getLogger(__name__)
state = {"parsed": False}


def unused(x):
    return x + 1


def parse(text):
    state["parsed"] = True
    return Version(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", default="1.0 beta")
    args = parser.parse_args([])
    logging.basicConfig(level=logging.INFO)
    log.info("checking %s", args.release)
    for attempt in range(3):
        try:
            parse(args.release)  # the key line: raises inside packaging
        finally:
            log.info("attempt %d", attempt)
    if not state["parsed"]:
        # decoy: the same type and message, raised from user code when the key line is gone
        raise InvalidVersion("Invalid version: '1.0 beta'")


if __name__ == "__main__":
    main()
'''


def test_reduces_without_slipping_into_the_decoy(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(DECOY)
    before = script.read_text()
    original = run_script(script).signature
    assert main(["reduce", str(script), "--json", "--workdir", str(tmp_path / "work")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(summary) >= {"input_lines", "output_lines", "oracle_calls", "seconds", "signature", "output"}
    assert script.read_text() == before  # the input is never modified
    out = Path(summary["output"])
    assert out == tmp_path / "job.min.py"
    reduced = run_script(out)
    assert reduced.signature == original  # library frames included: not the decoy's
    assert reduced.signature.frames
    assert summary["output_lines"] < summary["input_lines"] and summary["output_lines"] <= 6
    assert "Version(" in out.read_text()
    # the search says how busy its runs kept the slots: some runs, never more than its slots held
    search = next(p for p in summary["phases"] if p["phase"] == "search")
    assert 0 < search["run_seconds"] <= search["jobs"] * search["seconds"] + 1


def test_second_run_resumes_from_the_cache(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(DECOY)
    argv = ["reduce", str(script), "--json", "--workdir", str(tmp_path / "work")]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["resumed"] and second["oracle_calls"] == 0
    assert Path(second["output"]).read_text() == Path(first["output"]).read_text()


def test_resumes_from_an_interrupted_state(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(DECOY)
    workdir = tmp_path / "work"
    workdir.mkdir()
    import hashlib

    partial = "from packaging.version import Version\nVersion('1.0 beta')\n"
    (workdir / "state.json").write_text(
        json.dumps({"original": hashlib.sha256(DECOY.encode()).hexdigest(), "subject": "original", "best": partial})
    )
    assert main(["reduce", str(script), "--json", "--workdir", str(workdir)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["resumed"] and summary["output_lines"] == 2


def test_ctrl_c_during_the_cold_check_keeps_the_best_so_far(tmp_path, capsys, monkeypatch):
    """A benchmark's cap fell in the final cold check (qlora_merge_job): the search's result was lost, no output."""
    from minrepro.reduction.phases import verify

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify, "verify_cold", interrupted)
    script = tmp_path / "job.py"
    script.write_text(DECOY)
    assert main(["reduce", str(script), "--workdir", str(tmp_path / "work")]) == 130  # as a shell reports Ctrl-C
    assert "best script so far" in capsys.readouterr().err
    out = (tmp_path / "job.min.py").read_text()
    assert "INTERRUPTED, NOT VERIFIED" in out and "Version(" in out and "unused" not in out


def test_command_oracle(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("import os\nx = 1\nneedle = 2\ny = x + needle\n")
    oracle = f"{sys.executable} -c \"import sys; sys.exit(0 if 'needle' in open(sys.argv[1]).read() else 1)\""
    assert main(["reduce", str(script), "--oracle", oracle, "--json", "--workdir", str(tmp_path / "w")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["output_lines"] == 1 and "needle" in Path(summary["output"]).read_text()


@pytest.mark.parametrize(
    "body, message",
    [
        ("print('all good')\n", "nothing to reduce"),
        # fails in whichever run creates the marker first (atomic, so also when the runs are concurrent)
        (
            "import os\ntry:\n    os.close(os.open(os.environ['COUNTER'] + '.marker', os.O_CREAT | os.O_EXCL))\n"
            "except FileExistsError:\n    pass\nelse:\n    raise RuntimeError('first run only')\n",
            "fails flakily",
        ),
        ("def broken(:\n", "is not valid Python"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, monkeypatch, body, message):
    counter = tmp_path / "counter"
    counter.write_text("0")
    monkeypatch.setenv("COUNTER", str(counter))
    script = tmp_path / "job.py"
    script.write_text(body)
    assert main(["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    if message == "fails flakily":  # the traced run and one plain run disagree: no twin's run is waited for
        assert "1 of 2 runs (n=2" in err


def test_missing_interpreter_is_a_one_line_error(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("raise ValueError(1)\n")
    assert main(["reduce", str(script), "--python", "/no/such/python"]) == 2
    assert "interpreter not found" in capsys.readouterr().err


def test_slow_imports_do_not_fail_the_cold_verification(tmp_path, capsys):
    # Warm, the original runs in milliseconds; cold, the import costs more than the warm budget allows.
    helper = tmp_path / "slowlib.py"
    helper.write_text("import time\ntime.sleep(2.5)\n")
    script = tmp_path / "job.py"
    script.write_text("import slowlib\nfrom packaging.version import Version\nx = 1\nVersion('a b')\n")
    assert main(["reduce", str(script), "--json", "--workdir", str(tmp_path / "w")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["output_lines"] <= 3


ENUM_CONFIG = """\
import enum
from packaging.version import Version


class Task(str, enum.Enum):  # peft's TaskType is one: its repr is no literal
    CAUSAL_LM = "CAUSAL_LM"


class Config:
    task = Task.CAUSAL_LM
    release = "1.0 beta"


cfg = Config()
print(cfg.task)
Version(cfg.release)
"""


def test_a_config_read_whose_value_is_a_str_enum_does_not_crash_the_reduction(tmp_path, capsys):
    # a real user's training script (peft#3169's reporter's) ended `minrepro reduce` with a SyntaxError: the
    # bootstrap recorded `TaskType.CAUSAL_LM` as `<TaskType.CAUSAL_LM: 'CAUSAL_LM'>` and the pass parsed it
    script = tmp_path / "job.py"
    script.write_text(ENUM_CONFIG)
    assert main(["reduce", str(script), "--json", "--workdir", str(tmp_path / "work")]) == 0
    out = (tmp_path / "job.min.py").read_text()
    assert "Version('1.0 beta')" in out and "Task" not in out


DICT_CONFIG = """\
import json
from packaging.version import Version

DEFAULTS = {"release": {"text": "1.0 beta", "strict": True}, "log": {"level": "info", "every": 10}}


def check(section):
    return Version(section["text"])


config = json.loads(json.dumps(DEFAULTS))
config["log"]["level"] = "debug"
print(config["log"])
check(config["release"])
"""


def test_a_dict_config_is_resolved_to_literals_and_falls_off(tmp_path, capsys):
    # eval_then_export's config is a nested dict behind `json.loads(json.dumps(DEFAULTS))`: the reads
    # `config['model']`, `cfg['seed']` were never resolved (only `name.attr` was recorded), and the round-4 output
    # still carried DEFAULTS, the json round trip and every config read at 37 lines
    script = tmp_path / "job.py"
    script.write_text(DICT_CONFIG)
    assert main(["reduce", str(script), "--json", "--workdir", str(tmp_path / "work")]) == 0
    out = (tmp_path / "job.min.py").read_text()
    assert "Version('1.0 beta')" in out and "DEFAULTS" not in out and "json" not in out


INI_CONFIG = '''\
import configparser
from packaging.version import Version

cfg = configparser.ConfigParser()
cfg.read_string("""
[release]
text = 1.0 beta
strict = yes
tries = 2
""")
rel = cfg["release"]
if rel.getboolean("strict"):
    for _ in range(cfg["release"].getint("tries")):
        Version(rel.get("text"))
'''


def test_an_ini_config_read_through_getters_is_resolved_and_falls_off(tmp_path, capsys):
    # nightly_quant_report (an unseen script) kept its ConfigParser at 38 lines: `m.getint('layers')`,
    # `q.get('type')` are calls, and only `name.attr` / `name['k']` reads were recorded
    script = tmp_path / "job.py"
    script.write_text(INI_CONFIG)
    assert main(["reduce", str(script), "--json", "--workdir", str(tmp_path / "work")]) == 0
    out = (tmp_path / "job.min.py").read_text()
    assert "Version('1.0 beta')" in out and "configparser" not in out and "cfg" not in out


def test_getter_reads_are_keys_only_with_constant_arguments_on_a_read():
    import ast

    from minrepro.harness._bootstrap import read_key

    source = (
        "a = m.getint('layers')\nb = cfg['q'].get('type', 'nf4')\nc = m.get(name)\n"
        "d = make().get('x')\ne = m.getint('x', fallback=1)\nf = m.pop('x')\n"
    )
    keys = dict.fromkeys(k for k in map(read_key, ast.walk(ast.parse(source))) if k is not None)
    assert [k for k in keys if "(" in k] == ["m.getint('layers')", "cfg['q'].get('type', 'nf4')"]


def test_recorded_reads_become_literals_but_not_computed_floats_or_store_targets():
    from minrepro.reducers import Problem
    from minrepro.reducers.passes import resolve_recorded_values

    source = (
        "cfg = {'tol': 0.001, 'n': 3, 'a': {'b': 1}}\nstats = {'loss': sum(range(cfg['n'])) / 7}\n"
        "cfg['a']['b'] = 2\nif stats['loss'] > cfg['tol']:\n    raise RuntimeError(cfg['a'])\n"
    )
    problem = Problem(source, lambda batch: [True] * len(batch))
    recorded = {"cfg['tol']": "0.001", "cfg['n']": "3", "stats['loss']": "0.42857142857142855", "cfg['a']": "{'b': 2}"}
    problem.measure = lambda _: {"values": recorded}
    resolve_recorded_values(problem)
    assert "stats['loss'] > 0.001" in problem.current  # the computed loss stays a read
    assert "range(3)" in problem.current and "RuntimeError({'b': 2})" in problem.current
    assert "cfg['a']['b'] = 2" in problem.current  # a store's target is no read


def test_statements_that_never_ran_go_in_one_candidate_as_the_profiler_saw_them(tmp_path):
    """A wrapper that re-raises makes the whole `try` the failing statement; its tail after the failing call, the
    branch not taken and the `else:` never ran. The lines come from a real profiled run, not from the test."""
    import ast

    from minrepro.reducers import Problem
    from minrepro.reducers.passes import drop_unexecuted
    from minrepro.reduction.phases.search import statement_facts

    source = (
        "import json\n\ndef helper(x):\n    return json.dumps(x)\n\nverbose = False\nif verbose:\n"
        "    print('verbose')\ntry:\n    data = {'a': 1}\n    json.loads(helper(data))['b']\n"
        "    print('after the failure')\n    data = None\nexcept Exception as exc:\n"
        "    raise RuntimeError(f'job failed: {type(exc).__name__}') from exc\nelse:\n    print('no failure')\n"
    )
    script, profile = tmp_path / "job.py", tmp_path / "profile.json"
    script.write_text(source, encoding="utf-8")
    run = run_script(script, python=sys.executable, cwd=tmp_path, profile=profile)
    facts = statement_facts(source, run, json.loads(profile.read_text(encoding="utf-8")))
    sent = []
    problem = Problem(source, lambda batch: sent.extend(batch) or [True] * len(batch))
    problem.measure = lambda _: facts
    drop_unexecuted(problem)
    assert len(sent) == 1  # one candidate
    result = problem.current
    assert "after the failure" not in result and "data = None" not in result and "print('verbose')" not in result
    assert "no failure" not in result
    assert "json.loads(helper(data))['b']" in result and "def helper" in result and "return json.dumps(x)" in result
    ast.parse(result)


def test_what_never_ran_in_the_scripts_own_functions_goes_with_the_module_level_statements(tmp_path):
    """A server whose load fails: its request handlers never ran, nor did the load's tail after the failing call. One
    candidate drops them too (a method read somewhere keeps its name, with `pass` for a body; one read only by what
    goes with it goes whole), before the module-level one. A
    function run only in another thread looks unrun to the profile: where that candidate fails otherwise, the
    module-level one is taken. The lines come from real profiled runs."""
    import ast

    from minrepro.reducers import Problem
    from minrepro.reducers.passes import drop_unexecuted
    from minrepro.reduction.phases.search import statement_facts

    server = (
        'import json\n\nclass Server:\n    def load(self, text):\n        """Parse the config."""\n'
        "        self.config = json.loads(text)\n        self.ready = True\n        return self.config\n\n"
        "    def handle(self, request):\n        return {'id': request['id'], 'ok': self.ready}\n\n"
        "    def on_error(self):\n        return 'logged'\n\n    def __repr__(self):\n        return 'Server()'\n\n"
        "CALLS = 0\n\ndef helper(x):\n    global CALLS\n    CALLS += 1\n    return x.strip()\n\n"
        "server = Server()\nhook = server.on_error\n"
        "server.load(helper(' {oops '))\n"
        "print(server.handle({'id': 1}))\n"
    )
    threaded = (
        "import threading\n\ndef work(box):\n    box.append(int('x'))\n\nbox = []\n"
        "worker = threading.Thread(target=work, args=(box,))\nworker.start()\nworker.join()\nbox[0]\nprint('done')\n"
    )
    seen = {}
    for name, source in (("server", server), ("threaded", threaded)):
        script, profile = tmp_path / f"{name}.py", tmp_path / f"{name}.json"
        script.write_text(source, encoding="utf-8")
        run = run_script(script, python=sys.executable, cwd=tmp_path, profile=profile)
        facts = statement_facts(source, run, json.loads(profile.read_text(encoding="utf-8")))
        sent: list[str] = []

        def judge(batch, sent=sent):
            sent.extend(batch)  # the thread's function emptied: the script would then fail otherwise
            return ["box.append(int('x'))" in c or "def work" not in c for c in batch]

        problem = Problem(source, judge)
        problem.measure = lambda _, facts=facts: facts
        drop_unexecuted(problem)
        seen[name] = (sent, problem.current)
        ast.parse(problem.current)
    sent, result = seen["server"]
    assert len(sent) == 1 and result == sent[0]  # the candidate with the functions' unrun lines first, taken
    assert "def on_error(self):\n        pass" in result and "self.ready = True" not in result  # read: kept
    assert "def handle" not in result and "return 'Server()'" in result  # read no more: gone; a dunder untouched
    assert "global CALLS" in result  # it runs no line, yet without it `CALLS += 1` reads an unbound local
    assert "Parse the config" not in result and "json.loads(text)" in result and "return x.strip()" in result
    assert "print(server.handle" not in result
    sent, result = seen["threaded"]
    assert len(sent) == 2 and result == sent[1]  # refused with the thread's function emptied: the module-level one
    assert "box.append(int('x'))" in result and "print('done')" not in result


def test_the_slice_keeps_seeding_calls_that_no_name_carries():
    """`torch.manual_seed(0)` reads only a module: the slice dropped it, and since the search keeps every seed of a
    script whose own check raised, the one-candidate slice was refused without a run (nightly_quant_report's)."""
    from minrepro.reducers import Problem
    from minrepro.reducers.passes import slice_to_failure

    source = (
        "import random\nimport json\nunused = json.dumps({})\nrandom.seed(0)\nx = random.random()\nassert x > 2, x\n"
    )
    sent = []
    problem = Problem(source, lambda batch: sent.extend(batch) or [True] * len(batch), SearchSettings(keep_seeds=True))
    problem.measure = lambda _: {"failing_statement": "assert x > 2, x"}
    slice_to_failure(problem)
    assert len(sent) == 1 and "unused" not in problem.current and "random.seed(0)" in problem.current


@pytest.mark.parametrize("reads_doc", [True, False])
def test_the_slice_keeps_the_module_docstring_where_the_script_reads_doc(reads_doc):
    """`argparse.ArgumentParser(description=__doc__.splitlines()[0])`: the slice dropped the docstring, which binds
    `__doc__`, and the candidate failed with an AttributeError on None (a serving script's slice, refused at E4B on an
    H100 and on CPU). Where nothing reads `__doc__`, the docstring goes like any statement off the slice."""
    from minrepro.reducers import Problem
    from minrepro.reducers.passes import slice_to_failure

    description = "__doc__.splitlines()[0]" if reads_doc else "'tool'"
    source = (
        f'"""A serving tool."""\nimport argparse\nimport json\nunused = json.dumps({{}})\n'
        f"parser = argparse.ArgumentParser(description={description})\nargs = parser.parse_args([])\n"
        "raise RuntimeError(args)\n"
    )
    problem = Problem(source, lambda batch: [True] * len(batch))
    problem.measure = lambda _: {"failing_statement": "raise RuntimeError(args)"}
    slice_to_failure(problem)
    assert "unused" not in problem.current and ('"""A serving tool."""' in problem.current) == reads_doc


def test_an_assert_after_the_failure_goes_whole_and_one_that_ran_stays(tmp_path):
    """explore renders its oracle's check at the end; a library error before it means the check never ran. It may go
    with its data (a reduction once kept `changed = sorted()` before `assert not changed`, and failed with a
    TypeError where the bug is fixed); an assert that ran before the failure is still the script's own check."""
    from minrepro.reducers import Problem
    from minrepro.reducers.passes import FINAL_PASSES, PASSES
    from minrepro.reduction.phases.search import statement_facts

    source = (
        "import json\nlimit = 3\nassert limit > 2, 'ran'\nbefore = sorted([3, 1])\n"
        "json.loads('{')\nchanged = sorted(x for x in before if x > 1)\nassert not changed, f'{changed}'\n"
    )
    script, profile = tmp_path / "job.py", tmp_path / "profile.json"
    script.write_text(source, encoding="utf-8")
    run = run_script(script, python=sys.executable, cwd=tmp_path, profile=profile)
    facts = statement_facts(source, run, json.loads(profile.read_text(encoding="utf-8")))

    def fails_in_json(candidates):
        out = []
        for candidate in candidates:
            try:
                exec(compile(candidate, "<candidate>", "exec"), {})
                out.append(False)
            except json.JSONDecodeError:
                out.append(True)
            except Exception:
                out.append(False)
        return out

    problem = Problem(source, fails_in_json)
    problem.measure = lambda current: statement_facts(
        current,
        run,
        {"line_seconds": {str(i + 1): 0.0 for i, line in enumerate(current.splitlines()) if "changed" not in line}},
    )
    assert problem.admissible(source.replace("assert not changed, f'{changed}'\n", ""))
    assert not problem.admissible(source.replace("assert not changed", "assert changed"))
    assert not problem.admissible(source.replace("assert limit > 2, 'ran'\n", ""))  # it ran: it stays
    from minrepro.reducers.search import Observers, reduce_source

    result = reduce_source(source, fails_in_json, PASSES, FINAL_PASSES, observers=Observers(facts=problem.measure))
    assert "changed" not in result and "assert limit > 2" in result and "json.loads('{')" in result
    assert facts["executed"] and max(facts["executed"]) <= 5


SLOW_DECOY = DECOY.replace(
    "def main():", "def main():\n    import time\n    time.sleep(float(os.environ.get('SLOW', '0')))"
)


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGHUP"])
def test_a_terminated_reduce_writes_the_best_so_far_like_ctrl_c(tmp_path, signal_name):
    """`timeout`, a job scheduler or CI stop a reduction with SIGTERM (a closed terminal: SIGHUP): it must leave the
    best script so far, marked, with the command that resumes; a stopped H100 reduction once left nothing."""
    import os
    import signal
    import subprocess
    import time

    script = tmp_path / "job.py"
    script.write_text(SLOW_DECOY)
    # the original takes 60 s (an E4B load, say): the stop must not wait for the run under way
    env = {**os.environ, "SLOW": "60", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "minrepro",
            "reduce",
            str(script),
            "--workdir",
            str(tmp_path / "w"),
            "--executor",
            "cold",
            "--timeout",
            "120",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # in the establish phase, during the original's first run
    proc.send_signal(getattr(signal, signal_name))
    stopped = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - stopped < 20  # the run under way was killed, not waited for
    assert proc.returncode == 130, err
    assert f"interrupted by {signal_name}" in err and "best script so far" in err
    out = (tmp_path / "job.min.py").read_text()
    assert "INTERRUPTED, NOT VERIFIED" in out and "Version(" in out
    assert script.read_text() == SLOW_DECOY  # the user's script untouched


def test_timeouts_and_parallel_runs_follow_what_the_original_cost():
    from minrepro.harness import resources
    from minrepro.harness.runner import DEFAULT_TIMEOUT, RunResult

    def run(seconds: float, rss: float = 0.0, gpu: float = 0.0) -> RunResult:
        return RunResult(1, "", "", seconds, None, "", peak_rss_mb=rss, peak_gpu_mb=gpu)

    assert resources.timeout_for([run(2.0)], None) == DEFAULT_TIMEOUT  # never below the default
    assert resources.timeout_for([run(30.0), run(50.0)], None) == 150.0  # a multiple of the slowest
    assert resources.timeout_for([run(50.0)], 10.0) == 10.0  # the user's word wins
    assert resources.fits(10_000.0, 25_000.0) == 2 and resources.fits(0.0, 25_000.0) is None
    assert resources.fits(30_000.0, 25_000.0) == 1  # one run always goes
    assert resources.parallel_runs([run(1.0)], 4) == 4  # nothing recorded: what was asked


def test_a_time_budget_ends_the_search_with_a_verified_best(tmp_path, capsys):
    # a GPU user's job has a wall-clock limit: past --max-seconds no candidate runs, and what was reached is verified and
    # written, said to be maybe not minimal (here the budget ends before the first proposal: the original stands)
    script = tmp_path / "job.py"
    script.write_text(DECOY)
    original = run_script(script).signature
    argv = ["reduce", str(script), "--json", "--workdir", str(tmp_path / "work"), "--max-seconds", "0.001"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the budget is spent before the guard has run: the guard is said undecided, and the original, established by its
    # cold runs, is the result (no search past the budget, no verification that cannot fit)
    assert any(note.startswith("not reduced: ") for note in summary["notes"])
    assert summary["maybe_not_minimal"] and summary["budget_seconds"] == 0.001
    assert summary["guard"] == "undecided" and summary["oracle_calls"] == 0
    text = Path(summary["output"]).read_text()
    assert "# Not reduced: " in text and "# Guard: not decided within the time budget" in text
    assert "NOT VERIFIED" not in text
    assert run_script(Path(summary["output"])).signature == original


@pytest.mark.parametrize("argv", [["--max-seconds", "0"], ["--max-seconds", "5", "--scenario", "r03-peft-spill"]])
def test_a_bad_time_budget_is_a_one_line_error(argv, tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(DECOY)
    assert main(["reduce", *([] if "--scenario" in argv else [str(script)]), *argv]) == 2
    assert "--max-seconds" in capsys.readouterr().err


def test_the_twins_time_budget_is_measured_as_many_at_once_as_the_search_runs(tmp_path):
    # a twin that ran 0.5 s alone took 2.6 s two at once on 2 cores: a budget from the lone run refused candidates
    # that failed the same way, depending on what ran beside them
    from types import SimpleNamespace

    from minrepro.reduction.budget import per_candidate
    from minrepro.reduction.phases.search import rebudget

    class Contended:
        jobs = 2

        def run_many(self, paths, timeout, home):
            return [SimpleNamespace(seconds=0.5 * len(paths) ** 2) for _ in paths]

    oracle = SimpleNamespace(max_seconds=None, timeout=100.0, matches=lambda run: True, workdir=tmp_path, home=tmp_path)
    rebudget(oracle, Contended(), "x = 1\n", 100.0)
    assert oracle.max_seconds == per_candidate(2.0)


def test_the_traced_run_is_the_first_run_and_the_others_confirm_it_side_by_side(tmp_path, monkeypatch):
    """At E4B the scale-down's traced run is a load of 40 s: it is the first run, and the two others go side by side
    after it (with the scale-down, in a reduction); never for a script that fails flakily."""
    import threading

    from minrepro.errors import MinreproError
    from minrepro.harness.executors import ColdExecutor
    from minrepro.reduction.phases import establish

    script = tmp_path / "job.py"
    script.write_text("import time\ntime.sleep(1)\nraise ValueError('boom')\n")
    order = []

    def traced(timeout):
        order.append(("traced", threading.get_ident()))
        return ColdExecutor(sys.executable, 1).run_many([script], timeout, tmp_path)[0]

    original = establish.Original(script, sys.executable, 60, tmp_path)
    first = establish.first_run(original, traced)
    runs = establish.confirm(original, 3, [first], stand_in=True)
    assert first.signature.type == "ValueError" and len(runs) == 3 and runs[0] is first
    assert order and sum(r.seconds for r in runs[1:]) > 1.5  # two runs of 1 s each, after the traced one
    marker = tmp_path / "ran-once"  # the first run fails, the others pass
    script.write_text(
        f"import pathlib\nm = pathlib.Path({str(marker)!r})\nif not m.exists():\n"
        "    m.touch()\n    raise ValueError('boom')\n"
    )
    with pytest.raises(MinreproError, match="flakily"):
        first = establish.first_run(establish.Original(script, sys.executable, 60, tmp_path), None)
        establish.confirm(establish.Original(script, sys.executable, 60, tmp_path), 3, [first])


def test_a_traced_run_that_fails_otherwise_is_replaced_by_a_plain_run(tmp_path, monkeypatch):
    """The original runs three times in all where the traced run agrees (at E4B each is a 40-50 s load); where the
    traced run alone disagrees, one more plain run takes its place in the count (four runs), and it is still returned
    first, for the reduction to drop its twin."""
    from minrepro.errors import MinreproError
    from minrepro.harness.executors import ColdExecutor
    from minrepro.reduction.phases import establish

    counter = tmp_path / "runs.txt"
    script = tmp_path / "job.py"
    script.write_text(f"with open({str(counter)!r}, 'a') as fh:\n    fh.write('x')\nraise ValueError('boom')\n")
    other = tmp_path / "other.py"
    other.write_text(f"with open({str(counter)!r}, 'a') as fh:\n    fh.write('x')\nraise KeyError('other')\n")

    def traced(path):
        return lambda timeout: ColdExecutor(sys.executable, 1).run_many([path], timeout, tmp_path)[0]

    def cold_runs(first_script):
        first = establish.first_run(establish.Original(script, sys.executable, 60, tmp_path), traced(first_script))
        return establish.confirm(establish.Original(script, sys.executable, 60, tmp_path), 3, [first], stand_in=True)

    runs = cold_runs(script)
    assert len(runs) == 3 and len(counter.read_text()) == 3
    counter.unlink()
    runs = cold_runs(other)
    assert len(runs) == 4 and runs[0].signature.type == "KeyError" and len(counter.read_text()) == 4
    assert all(r.signature.type == "ValueError" for r in runs[1:])
    # plain runs that disagree among themselves: flaky, and no run more is spent on the traced one
    flaky = tmp_path / "flaky.py"
    flaky.write_text(
        f"import os\nwith open({str(counter)!r}, 'a') as fh:\n    fh.write('x')\n"
        f"if os.path.getsize({str(counter)!r}) == 1:\n    raise RuntimeError('first plain run')\n"
    )
    first = establish.first_run(establish.Original(flaky, sys.executable, 60, tmp_path), traced(script))
    counter.unlink()
    monkeypatch.setattr(establish, "parallel_runs", lambda runs, wanted: 1)  # one after another: the first one fails
    with pytest.raises(MinreproError, match="flakily"):
        establish.confirm(establish.Original(flaky, sys.executable, 60, tmp_path), 3, [first], stand_in=True)
    assert len(counter.read_text()) == 2


def test_the_cold_verification_runs_the_bad_and_the_good_runs_side_by_side(tmp_path, monkeypatch):
    """One bad run and two good runs per good env, `jobs` at once (a long script runs to its end where the bug is
    fixed: one after another they outlasted a GPU call's last 90 s); each env's runs judged as before."""
    import threading
    import time
    from types import SimpleNamespace

    from minrepro.reduction.phases import verify

    live, most, lock = [0], [0], threading.Lock()

    class Cold:
        def __init__(self, python, jobs):
            self.python = python

        def run_many(self, scripts, timeout, home):
            with lock:
                live[0] += 1
                most[0] = max(most[0], live[0])
            time.sleep(0.2)
            with lock:
                live[0] -= 1
            return [
                SimpleNamespace(
                    signature="bug" if self.python in ("bad", "still-bad") else None, loaded=("torch",), seconds=0.2
                )
            ]

    monkeypatch.setattr(verify, "ColdExecutor", Cold)
    oracle = SimpleNamespace(
        workdir=tmp_path,
        home=tmp_path,
        matches=lambda run: run.signature == "bug",
        litters=lambda run: "",
        good_timeout=None,
        good_runs=2,
        not_passing=lambda run: "also in a good env: not the bug" if run.signature else "",
    )
    guard = SimpleNamespace(pythons=("fixed", "also-fixed"))
    cold = verify.verify_cold("x = 1\n", oracle, guard, ("bad", 5.0), jobs=8)
    assert (cold.verified, cold.good_pass, cold.why, cold.loaded) == (True, True, "", ("torch",))
    assert "exit 0 in 4 of 4" in cold.good_said
    assert most[0] == 5  # 1 bad + 2 x 2 good, all at once
    most[0] = 0
    cold = verify.verify_cold("x = 1\n", oracle, SimpleNamespace(pythons=("still-bad",)), ("still-bad", 5.0), jobs=2)
    assert (cold.verified, cold.good_pass) == (False, False) and "still-bad" in cold.why and most[0] == 2


def test_a_chained_pass_tries_every_edit_at_once_first_and_takes_it_in_one_round():
    """Three functions to inline, each accepted anyway: with `chain`, the first batch carries all three inlined, and
    one round (one batch of runs, 13 s each at E4B on a GPU) replaces three; without it, one round per function."""
    from minrepro.reducers import Problem
    from minrepro.reducers.passes import greedy, inline_functions

    source = (
        "def a():\n    x = 1\n    return x\n\ndef b():\n    y = 2\n    return y\n\ndef c():\n    z = 3\n"
        "    return z\n\nu = a()\nv = b()\nw = c()\nraise RuntimeError(u + v + w)\n"
    )
    for chain, rounds in ((True, 1), (False, 3)):
        batches: list[list[str]] = []
        problem = Problem(source, lambda batch: batches.append(batch) or [True] * len(batch), SearchSettings(jobs=4))
        greedy(inline_functions, chain=chain)(problem)
        assert "def " not in problem.current and "raise RuntimeError(u + v + w)" in problem.current
        assert len(batches) == rounds, (chain, batches)


def test_facts_kept_in_another_format_are_measured_again(tmp_path):
    """A work dir's facts from an older minrepro lack what the passes now read (the lines of the script's own
    functions): they are measured again, and the new record is read back in the current format."""
    from minrepro.reduction.phases.search import facts
    from minrepro.reduction.workdirs import digest

    source = "def f():\n    return 1\n\nf()\n"
    (tmp_path / "facts.jsonl").write_text(json.dumps({"digest": digest(source), "facts": {"heavy": []}}) + "\n")
    profiled = []

    class Stub:
        def profile(self, path, out, timeout, home):
            profiled.append(path.read_text())
            return run_script(path, python=sys.executable, cwd=tmp_path, profile=out)

    found = facts(sys.executable, 30, tmp_path, tmp_path, Stub())(source)
    assert profiled == [source] and found["function_lines"] == [2]
    again = facts(sys.executable, 30, tmp_path, tmp_path, Stub())(source)
    assert profiled == [source] and again == found  # read back: not measured a second time


def test_no_ast_is_built_outside_the_reduction_s_thread(tmp_path, capsys, monkeypatch):
    """CPython 3.11 can fail an AST built in one thread while another builds one ("AST constructor recursion depth
    mismatch"): what the background threads need of the script (its imports, a patch, the guard's version sets) is
    read in the reduction's own thread."""
    import ast
    import threading

    script = tmp_path / "job.py"
    script.write_text(DECOY)
    elsewhere: list[str] = []
    parse = ast.parse

    def recorded(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            elsewhere.append(threading.current_thread().name)
        return parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", recorded)
    assert main(["reduce", str(script), "--json", "--workdir", str(tmp_path / "work")]) == 0
    assert elsewhere == []
