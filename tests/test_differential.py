"""Faithful reductions: a differential oracle (the candidate must fail in the bad world and not in a fixed one),
values feeding a check kept as data, load-bearing defaults made explicit, and who raised a failure as part of its
identity. A fake installed library stands in for the HF stack: version 1 has the bug, version 2 does not."""

from __future__ import annotations

import importlib.util
import json
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minrepro.cli import main
from minrepro.harness.oracle import Cache, SignatureOracle
from minrepro.harness.runner import RunResult, run_script
from minrepro.harness.signature import Frame, Signature

BUGGY = '''
import os


def save(path):
    os.makedirs(path)
    open(os.path.join(path, "config"), "w").write("3")


def load(path):
    return Layer(int(open(os.path.join(path, "config")).read()))


def merge_error(quantized):
    """The library's bug: merging into a quantized base loses the adapter (an error of 0.5, not ~0.01)."""
    return 0.5 if quantized else 0.0


class Layer:
    def __init__(self, n, compress=True):
        self.n, self.compress = n, compress

    def offload(self):
        if self.compress:  # the bug needs the default compress=True
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
'''
FIXED = BUGGY.replace("return 0.5 if quantized else 0.0", "return 0.01 if quantized else 0.0").replace(
    "        if self.compress:  # the bug needs the default compress=True\n            raise",
    "        if False:\n            raise",
)


def _library(root: Path, source: str) -> Path:
    """A site directory holding `fakelib` with dist-info, so the bootstrap counts its frames as a library's."""
    (root / "fakelib").mkdir(parents=True)
    (root / "fakelib" / "__init__.py").write_text(source)
    info = root / "fakelib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("fakelib\n")
    return root


def _interpreter(tmp_path: Path, name: str, site: Path) -> str:
    """An 'interpreter' whose environment has `site` on its path (a wrapper around this Python)."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def worlds(tmp_path: Path) -> tuple[str, str]:
    bad = _interpreter(tmp_path, "bad-python", _library(tmp_path / "bad", BUGGY))
    good = _interpreter(tmp_path, "good-python", _library(tmp_path / "good", FIXED))
    return bad, good


PARITY = """
import argparse
import fakelib

parser = argparse.ArgumentParser()
parser.add_argument("--quantized", action="store_true", default=True)
args = parser.parse_args([])
TOLERANCE = 0.05
error = fakelib.merge_error(args.quantized)
print("merged")
assert error < TOLERANCE, f"merge diverges from the adapter output: relative error {error:.3f}"
"""


def _reduce(tmp_path: Path, script: str, *extra: str) -> tuple[str, dict]:
    path = tmp_path / "job.py"
    path.write_text(script)
    out = tmp_path / "job.min.py"
    code = main(["reduce", str(path), "-o", str(out), "--workdir", str(tmp_path / "work"), "--json", *extra])
    assert code == 0
    return out.read_text(), path


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_guarded_reduction_keeps_the_tolerance_and_the_quantization(worlds, tmp_path, capsys):
    bad, good = worlds
    text, _ = _reduce(tmp_path, PARITY, "--python", bad, "--good-python", good)
    summary = _last_json(capsys)
    assert summary["guard"] == "good-env" and summary["passes_in_good_env"] is True
    guard_line = next(line for line in text.splitlines() if line.startswith("# Guard:"))
    assert str(tmp_path) not in guard_line and "/" not in guard_line  # a maintainer's box has no such path
    # shrinking the tolerance or dropping the quantization keeps the symptom in the bad world, but the fixed
    # world then fails too: the differential oracle refuses both
    assert "0.05" in text and "argparse" not in text
    assert not any(f"merge_error({v})" in text for v in ("0", "None", "False"))


def test_unguarded_reduction_freezes_the_values_a_check_reads(worlds, tmp_path, capsys):
    bad, _ = worlds
    text, _ = _reduce(tmp_path, PARITY, "--python", bad, "--guard", "none")
    summary = _last_json(capsys)
    assert summary["guard"] == "none" and any("UNGUARDED" in n for n in summary["notes"])
    assert "TOLERANCE = 0.05" in text


def test_a_load_bearing_default_comes_back_explicit(worlds, tmp_path, capsys):
    bad, good = worlds
    script = (
        "import fakelib\nimport logging\nlogging.basicConfig()\nlayer = fakelib.Layer(64, compress=True)\n"
        "layer.offload()\n"
    )
    text, _ = _reduce(tmp_path, script, "--python", bad, "--good-python", good)
    summary = _last_json(capsys)
    assert "compress=True" in text and "# fails only with compress=True" in text
    [trigger] = [t for t in summary["triggers"] if t["keyword"] == "compress"]
    assert trigger["load_bearing"] and not trigger["shown"]  # the search had dropped it: it equals the default


def test_a_good_python_where_the_original_still_fails_is_refused(worlds, tmp_path, capsys):
    bad, _ = worlds
    path = tmp_path / "job.py"
    path.write_text(PARITY)
    assert main(["reduce", str(path), "--python", bad, "--good-python", bad, "--workdir", str(tmp_path / "w")]) == 2
    assert "does not pass under --good-python" in capsys.readouterr().err


def test_the_same_message_raised_by_the_script_is_another_failure(worlds, tmp_path):
    bad, _ = worlds
    from minrepro.harness.runner import run_script

    library = tmp_path / "library.py"
    library.write_text("import fakelib\nfakelib.Layer(1).offload()\n")
    decoy = tmp_path / "decoy.py"
    decoy.write_text("import fakelib\nraise RuntimeError('Tensor.item() cannot be called on meta tensors')\n")
    ours, theirs = run_script(library, python=bad).signature, run_script(decoy, python=bad).signature
    assert (ours.type, ours.message) == (theirs.type, theirs.message)
    assert ours.raised_by == "library" and theirs.raised_by == "script" and ours != theirs


# --- the oracle's rule, as a property ------------------------------------------------------------------

SIG = Signature("exception", "RuntimeError", "boom", (Frame("fakelib", "fakelib", "f"),), (), "library")
OTHER = Signature("exception", "ValueError", "other", (), (), "script")


class _Table:
    """An executor that answers from a table: candidate source -> signature (None: it passes)."""

    name = "table"
    SECONDS = 0.25  # what each run takes

    def __init__(self, table: dict[str, Signature | None]):
        self.table = table

    def run_many(self, scripts, timeout, home=None):
        return [RunResult(1, "", "", self.SECONDS, self.table[Path(s).read_text()], "") for s in scripts]

    def close(self):
        pass


outcome = st.sampled_from([SIG, OTHER, None])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(outcome, outcome), min_size=1, max_size=6))
def test_interesting_means_the_bug_here_and_not_in_the_fixed_world(tmp_path_factory, rows):
    work = tmp_path_factory.mktemp("oracle")
    sources = [f"candidate = {i}\n" for i in range(len(rows))]
    bad = _Table({s: b for s, (b, _) in zip(sources, rows, strict=False)})
    good = _Table({s: g for s, (_, g) in zip(sources, rows, strict=False)})
    oracle = SignatureOracle(Cache(work / "c.jsonl", "k"), work, 10, executor=bad, original=SIG, good=[good])
    expected = [b == SIG and g is None for b, g in rows]
    answers = oracle.test_many(sources)
    # judged in order up to the first interesting one; those after it wait for their good runs (None)
    first = expected.index(True) if True in expected else len(expected)
    assert answers[: first + 1] == expected[: first + 1] and all(
        a in (None, e) for a, e in zip(answers, expected, strict=True)
    )
    # where the bug is fixed the original passes: so must the candidate (failing otherwise there is no proof)
    assert [a for a, _ in oracle.outcomes(sources)] == expected
    assert oracle.test_many(sources) == expected  # answers are cached, and the same


# --- what a new user hit -------------------------------------------------------------------------------


def _signed_job(bad: str, tmp_path: Path, capsys) -> tuple[str, str]:
    """A failing script and the file holding what `signature --json` printed for it."""
    script = tmp_path / "job.py"
    script.write_text("import fakelib\nfakelib.Layer(1).offload()\n")
    assert main(["signature", str(script), "--python", bad, "--json"]) == 0
    printed = tmp_path / "sig.json"
    printed.write_text(capsys.readouterr().out.strip().splitlines()[-1])
    return str(script), str(printed)


def test_matches_takes_what_signature_json_prints(worlds, tmp_path, capsys):
    bad, _ = worlds
    script, printed = _signed_job(bad, tmp_path, capsys)
    assert main(["matches", "--expect", printed, script, "--python", bad]) == 0


def test_matches_with_a_good_python_is_the_differential_oracle(worlds, tmp_path, capsys):
    # the same test `reduce --good-python` uses, for other reducers: the bug here, and not where it is fixed
    bad, good = worlds
    script, printed = _signed_job(bad, tmp_path, capsys)
    assert main(["matches", "--expect", printed, script, "--python", bad, "--good-python", good]) == 0
    assert main(["matches", "--expect", printed, script, "--python", bad, "--good-python", bad]) == 1


@pytest.mark.parametrize(
    "argv_of, message",
    [
        (lambda p, d: ["signature", str(p)], "is not valid Python"),
        (lambda p, d: ["signature", str(p.with_name("ok.py")), "--python", str(d)], "names a directory"),
        (lambda p, d: ["report", "gemma4-offloaded-pad-embedding", "--results", str(d)], "no recorded run of"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv_of, message):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    (tmp_path / "ok.py").write_text("raise ValueError('x')\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(argv_of(broken, empty)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="needs an interpreter without torch")
def test_a_failed_import_of_the_libraries_under_test_is_refused(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("import torch\nprint(torch.ones(1))\n")
    code = main(["reduce", str(script), "--workdir", str(tmp_path / "w"), "--python", sys.executable])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot import torch" in err and "--python" in err  # refused, not reduced to the import line


def test_a_reduced_script_pins_what_its_run_loaded_not_only_what_it_imports(worlds, tmp_path):
    # BitsAndBytesConfig needs bitsandbytes without an import of it: a header from imports alone left it out,
    # and `uv run` of the handed-over script failed before reaching the bug
    from minrepro.reduction.output import pep723

    bad, _ = worlds
    script = tmp_path / "indirect.py"
    script.write_text("import importlib\nimportlib.import_module('fake' + 'lib')\nraise SystemExit(3)\n")
    assert "fakelib" in run_script(script, python=bad).loaded
    versions = {"transformers": "5.6.2", "bitsandbytes": "0.49.2", "tokenizers": "0.22.2", "peft": "0.19.1"}
    header = pep723("from transformers import BitsAndBytesConfig\n", versions, loaded=("bitsandbytes", "numpy"))
    assert '"bitsandbytes==0.49.2"' in header and '"transformers==5.6.2"' in header
    assert "numpy" not in header and "peft" not in header


class _Alternating:
    """A good env where the candidate passes, then fails the same way, then passes...: a nondeterministic script."""

    name = "alternating"

    def __init__(self):
        self.calls = 0

    def run_many(self, scripts, timeout, home=None):
        out = []
        for _ in scripts:
            self.calls += 1
            out.append(
                RunResult(1 if self.calls % 2 == 0 else 0, "", "", 0.0, SIG if self.calls % 2 == 0 else None, "")
            )
        return out

    def close(self):
        pass


@pytest.mark.parametrize("good_runs, interesting", [(1, True), (2, False)])
def test_a_candidate_that_only_sometimes_passes_where_fixed_is_not_the_bug(tmp_path, good_runs, interesting):
    # eval_then_export: a reduction dropped the seed of the held-out batches its own check compares; where the bug
    # is fixed that candidate passed once in two, a single good run took it, and the cold verification refused it
    bad = _Table({"candidate = 1\n": SIG})
    oracle = SignatureOracle(
        Cache(tmp_path / "c.jsonl", "k"),
        tmp_path,
        10,
        executor=bad,
        original=SIG,
        good=[_Alternating()],
        good_runs=good_runs,
    )
    assert oracle.test_many(["candidate = 1\n"]) == [interesting]


def test_write_pins_reads_the_reference_run_instead_of_running_again(worlds, tmp_path):
    bad, _ = worlds
    runs = tmp_path / "runs.txt"
    script = tmp_path / "job.py"  # counts its own runs, wherever it is run from
    script.write_text(f"open({str(runs)!r}, 'a').write('x')\nimport fakelib\nfakelib.Layer(1).offload()\n")
    out = tmp_path / "pinned.py"
    main(["check", str(script), "--python", bad, "--write-pins", str(out)])
    assert out.read_text().startswith("# /// script")
    assert runs.read_text() == "x"


def test_a_candidate_that_writes_into_the_working_directory_is_refused_when_the_original_does_not(tmp_path):
    # lowmem_chat_server's reduction dropped the temp dir its checkpoint went to: the output left `base/` wherever
    # its user ran it
    class Writes(_Table):
        def run_many(self, scripts, timeout, home=None):
            return [RunResult(1, "", "", 0.0, SIG, "", cwd_writes=("base",)) for _ in scripts]

    def oracle(allowed):
        return SignatureOracle(
            Cache(tmp_path / f"{allowed}.jsonl", "k"),
            tmp_path,
            10,
            executor=Writes({}),
            original=SIG,
            cwd_writes_allowed=allowed,
        )

    assert oracle(True).test_many(["x = 1\n"]) == [True]
    refused = oracle(False)
    assert refused.outcomes(["x = 1\n"]) == [
        (False, f"{SIG.headline} (writes base into the working directory; the original does not)")
    ]


def test_each_answer_records_what_judging_it_cost(tmp_path):
    bad = _Table({"candidate = 1\n": SIG, "other = 2\n": None})
    good = _Table({"candidate = 1\n": None})
    cache = tmp_path / "c.jsonl"
    SignatureOracle(Cache(cache, "k"), tmp_path, 10, executor=bad, original=SIG, good=[good], good_runs=2).test_many(
        ["candidate = 1\n", "other = 2\n"]
    )
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    assert sorted(r["seconds"] for r in records) == [pytest.approx(_Table.SECONDS), pytest.approx(3 * _Table.SECONDS)]


CRASH = """
import os
import tempfile
import fakelib

root = tempfile.mkdtemp()
path = os.path.join(root, "base")
fakelib.save(path)
fakelib.load(path).offload()
"""


SEEDED_PARITY = PARITY.replace("import fakelib\n", "import fakelib\nimport random\nrandom.seed(0)\n")


@pytest.mark.parametrize(
    "script, good_runs",
    [(PARITY, 2), (SEEDED_PARITY, 1), (CRASH, 1)],
    ids=["own-check-unseeded", "own-check-seeded", "library-crash"],
)
def test_good_env_runs_per_candidate_depend_on_who_raised_and_on_seeds(worlds, tmp_path, capsys, script, good_runs):
    # a library's crash is a code path: one run where the bug is fixed tells; the script's own check reads values,
    # which only a kept seed pins
    bad, good = worlds
    _reduce(tmp_path, script, "--python", bad, "--good-python", good)
    summary = _last_json(capsys)
    assert summary["good_runs"] == good_runs and summary["passes_in_good_env"] is True


def test_a_reduction_never_starts_writing_into_the_directory_it_is_run_from(worlds, tmp_path, capsys):
    # `os.path.join(root, "base")` -> `"base"` keeps the crash and drops the temp dir: the repro would
    # leave a file wherever its user runs it (lowmem_chat_server's left `base/`)
    bad, good = worlds
    text, _ = _reduce(tmp_path, CRASH, "--python", bad, "--good-python", good)
    outcomes = [json.loads(line)["note"] for line in (tmp_path / "work" / "cache.jsonl").read_text().splitlines()]
    assert any("into the working directory" in note for note in outcomes)  # the branch was reached
    assert "mkdtemp" in text
    run = run_script(tmp_path / "job.min.py", python=bad, isolated=True)
    assert run.signature is not None and run.cwd_writes == ()


class _SlowOnce(_Table):
    """Each candidate's first run is slow (a busy box), later ones take their usual time; "slow = ..." always is."""

    def __init__(self, table):
        super().__init__(table)
        self.seen = set()

    def run_many(self, scripts, timeout, home=None):
        out = []
        for s in scripts:
            text = Path(s).read_text()
            seconds = 5.0 if text.startswith("slow") or text not in self.seen else self.SECONDS
            self.seen.add(text)
            out.append(RunResult(1, "", "", seconds, self.table[text], ""))
        return out


def test_a_slow_run_is_confirmed_before_it_refuses_a_candidate(tmp_path):
    sources = ["busy = 1\n", "slow = 1\n"]
    oracle = SignatureOracle(
        Cache(tmp_path / "c.jsonl", "k"),
        tmp_path,
        10,
        executor=_SlowOnce(dict.fromkeys(sources, SIG)),
        original=SIG,
        max_seconds=1.0,
    )
    assert oracle.test_many(sources) == [True, False]  # the candidate that really is slower is still refused


def test_a_resumed_best_that_was_never_settled_where_the_bug_is_fixed_is_judged_first(worlds, tmp_path, capsys):
    """The search takes a yes ahead of its runs where the bug is fixed; stopped before they answered, the saved best
    may be one they refuse (here the tolerance shrunk to 0.0, which fails in the fixed world too). Resumed, it is
    judged first, and the search goes on from the settled one before it."""
    import hashlib

    bad, good = worlds
    refused = PARITY.replace("TOLERANCE = 0.05", "TOLERANCE = 0.0")
    workdir = tmp_path / "work"
    workdir.mkdir()
    original = hashlib.sha256(PARITY.encode()).hexdigest()
    state = {"original": original, "subject": "original", "best": refused, "before": PARITY}
    (workdir / "state.json").write_text(json.dumps(state))
    text, _ = _reduce(tmp_path, PARITY, "--python", bad, "--good-python", good)
    summary = _last_json(capsys)
    assert summary["resumed"] and summary["passes_in_good_env"] is True
    assert "0.05" in text and "TOLERANCE = 0.0\n" not in text
