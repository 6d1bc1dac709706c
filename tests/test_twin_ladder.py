"""The twin's ladder: each twin judged where the script fails and where the bug is fixed, from the most shrunk to
the least; a step refused where the bug is fixed is said, with the failure and the twin's line it came from."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from minrepro.harness.runner import RunResult
from minrepro.harness.signature import Signature
from minrepro.reducers.scale import VOCAB_FIELD, ladder, plan_from_trace
from minrepro.reduction.guard import GuardSearch, OutOfTime
from minrepro.reduction.scale import Refusal, TwinJudge, try_scale_down, where_it_failed

ORIGINAL = Signature("exception", "TypeError", "Params4bit.__new__() got an unexpected keyword argument", ())
INDEX_ERROR = Signature("exception", "IndexError", "index out of range in self", ())

JOB = """\
import torch
from transformers import AutoModelForCausalLM

PROMPTS = {"greeting": 22335, "question": 3689}


def main():
    model = AutoModelForCausalLM.from_pretrained("/data/ckpt/base")
    for name, first in PROMPTS.items():
        ids = torch.tensor([[2, first]])
        model.generate(ids)


main()
"""
CONFIG = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 4, "vocab_size": 32000}
RECORDS = [
    {
        "event": "from_pretrained",
        "status": "returned",
        "line": 8,
        "model_class": "LlamaForCausalLM",
        "model_type": "llama",
        "config": CONFIG,
        "config_defaults": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32},
    },
    {"event": "token_ids", "ids": [2], "table": 32000},
]


def run(signature: Signature | None, seconds: float = 1.0, lines: tuple[int, ...] = ()) -> RunResult:
    headline = signature.headline if signature else ""
    return RunResult(1 if signature else 0, "", "", seconds, signature, headline, script_lines=lines)


def fixed_world(refuse):
    """A good env whose runs of a twin fail with IndexError at the twin's generate line where `refuse(text)`."""

    def run_good(sources, python, jobs):
        out = []
        for text in sources:
            line = next(i for i, t in enumerate(text.splitlines(), 1) if "generate" in t)
            out.append(run(INDEX_ERROR, lines=(line,)) if refuse(text) else run(None))
        return out

    return run_good


def test_the_ladder_goes_from_the_most_shrunk_to_the_vocabulary_kept():
    plan = plan_from_trace(RECORDS, JOB)
    assert [r.kept for r in ladder(plan)] == [(), (VOCAB_FIELD,)]


def test_a_twin_refused_where_the_bug_is_fixed_climbs_to_the_vocabulary_kept_and_says_why():
    said, rungs = [], []
    judge = TwinJudge(
        lambda sources: [True] * len(sources),  # where the script fails, every twin fails the same way
        {"good-python": False},
        fixed_world(lambda text: "'vocab_size': 32000" not in text),  # ids past a shrunk vocabulary
        lambda r: r.signature == ORIGINAL,
        jobs=1,
        say=said.append,
    )
    traced = RunResult(1, "", "", 1.0, ORIGINAL, "", trace=tuple(RECORDS))

    def on_rung(name, **told):
        rungs.append(name)
        judge.on_rung(name, **told)

    scaled = try_scale_down(JOB, traced, judge, lambda text: None, on_rung)
    assert scaled is not None and "'vocab_size': 32000" in scaled.source
    assert "'hidden_size': 64" in scaled.source  # the dimensions are still shrunk on that step
    assert rungs == [r.name for r in ladder(plan_from_trace(RECORDS, JOB))]
    (refusal,) = judge.refused
    assert refusal.rung == rungs[0]
    assert refusal.why.startswith("IndexError: index out of range in self (at `model.generate(ids)`")
    assert said == [f"scale-down: {refusal}"]
    # the accepted twin's runs where the bug is fixed are kept for the guard
    assert all(r.signature is None for r in judge.good_runs[scaled.source]["good-python"])


def test_the_same_failure_in_an_env_the_guard_has_not_judged_leaves_the_twin_to_the_guard():
    """Where the env the twin is judged in may not fix the bug at all, failing there the same way says nothing of
    the twin; in an env the user named as fixed, it refuses the twin."""
    same = lambda sources, python, jobs: [run(ORIGINAL) for _ in sources]  # noqa: E731
    for named, holds in ((False, True), (True, False)):
        judge = TwinJudge(lambda s: [True] * len(s), {"py": named}, same, lambda r: r.signature == ORIGINAL)
        assert judge(["twin = 1\n"]) == [holds]


def test_lazily_judged_the_first_twin_the_bad_world_accepts_is_the_only_one_run_where_the_bug_is_fixed():
    asked = []

    def run_good(sources, python, jobs):
        asked.extend(sources)
        return [run(None) for _ in sources]

    judge = TwinJudge(lambda s: [False, True, True], {"py": False}, run_good, lambda r: False, jobs=2)
    assert judge(["a\n", "b\n", "c\n"]) == [False, True, False]
    assert asked == ["b\n", "b\n"]


def test_where_it_failed_names_the_line_of_the_script_and_survives_a_line_it_does_not_have():
    source = "import torch\nmodel.generate(ids)\n"
    assert where_it_failed(run(INDEX_ERROR, lines=(1, 2)), source) == (
        "IndexError: index out of range in self (at `model.generate(ids)`)"
    )
    assert where_it_failed(run(INDEX_ERROR, lines=(9,)), source) == "IndexError: index out of range in self"
    assert str(Refusal("x", "y")) == "the twin with x fails where the bug is fixed: y"


def test_the_guard_refuses_to_start_a_run_the_budget_cannot_hold(tmp_path, monkeypatch):
    from minrepro.reduction import guard as guard_module

    started = []

    class Cold:
        def __init__(self, *a):
            pass

        def run_many(self, paths, timeout, home):
            started.append(timeout)
            return [run(Signature("timeout", "Timeout", "", ())) for _ in paths]

    monkeypatch.setattr(guard_module, "ColdExecutor", Cold)
    search = GuardSearch(tmp_path / "job.py", "", ORIGINAL, "", lambda r: False, None, 600.0, print, least=30.0)
    search.until = time.monotonic() + 10  # less than a run of the subject takes
    with pytest.raises(OutOfTime, match="10 s of the time budget were left"):
        search.passes_in("good")
    assert started == []
    search.until = time.monotonic() + 100  # a run is started, cut by the budget: undecided, not "fails"
    with pytest.raises(OutOfTime, match="still going when the budget ended"):
        search.passes_in("good")
    assert 90 < started[0] <= 100


def test_the_images_own_variables_are_neither_set_nor_named(tmp_path):
    from minrepro.inputs import record_env

    moved, held = record_env(
        {
            "CUDA_VERSION": "13.0.2",
            "NCCL_VERSION": "2.27",
            "TORCH_CUDA_ARCH_LIST": "9.0",
            "NV_LIBCUBLAS_VERSION": "13",
            "NVIDIA_VISIBLE_DEVICES": "all",
            "BNB_CUDA_VERSION": "130",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
            "HF_HOME": str(tmp_path),
        }
    )
    assert moved == {"BNB_CUDA_VERSION": "130", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert held == {"HF_HOME": str(tmp_path)}


def test_a_memo_keeps_the_ladders_refusals(tmp_path: Path):
    from minrepro.reduction.scale import ScaleDown

    scaled = ScaleDown("x = 1\n", "d", [], 3, refused=[Refusal("a", "why")], rung="b")
    back = ScaleDown.from_json(scaled.to_json(), tmp_path / "twin.py")
    assert back.refused == [Refusal("a", "why")] and back.rung == "b" and back.path == tmp_path / "twin.py"


def test_a_step_refused_where_the_bug_is_fixed_is_left_whole_and_delta_debugging_is_not():
    """The twins of one step share its shrink (they differ in layer cuts and towers): once one fails where the bug is
    fixed otherwise than the bug, the rest of the step is not run. Delta debugging's twins shrink different fields."""
    asked = []

    def run_good(sources, python, jobs):
        asked.extend(sources)
        return [run(INDEX_ERROR) for _ in sources]

    judge = TwinJudge(lambda s: [True] * len(s), {"py": False}, run_good, lambda r: r.signature == ORIGINAL)
    judge.on_rung("every dimension shrunk")
    assert judge(["a\n", "b\n"]) == [False, False] and asked == ["a\n", "a\n"]
    assert judge(["c\n"]) == [False] and asked == ["a\n", "a\n"]  # the step's next batch: no run at all
    fresh = TwinJudge(lambda s: [True] * len(s), {"py": False}, run_good, lambda r: r.signature == ORIGINAL)
    fresh.on_rung("by delta debugging", False)
    assert fresh(["d\n", "e\n"]) == [False, False] and asked[2:] == ["d\n", "d\n", "e\n", "e\n"]
    # where the ladder's steps were refused where the bug is fixed, delta debugging runs nothing: real scale next
    judge.on_rung("by delta debugging", False)
    assert judge(["f\n"]) == [False] and "f\n" not in asked


def test_where_the_cores_hold_them_the_first_twins_good_runs_go_beside_the_batch_on_a_ladder_step_only():
    import threading

    started = threading.Event()

    def bad(sources):  # the good runs must have started while the bad runs go
        assert started.wait(5)
        return [True] * len(sources)

    def run_good(sources, python, jobs):
        started.set()
        return [run(None) for _ in sources]

    judge = TwinJudge(bad, {"py": False}, run_good, lambda r: False, jobs=2, room=16)
    judge.on_rung("every dimension shrunk")
    assert judge(["a\n", "b\n"]) == [True, False]
    started.clear()
    judge.on_rung("by delta debugging", False)  # its twins may keep real-size fields: the original's slots hold
    lazy = TwinJudge(
        lambda s: [started.is_set() is False] * len(s), {"py": False}, run_good, lambda r: False, 2, room=16
    )
    lazy.on_rung("by delta debugging", False)
    assert lazy(["c\n", "d\n"]) == [True, False]


def test_a_ladder_steps_twins_have_their_good_runs_beside_the_batch_where_the_cores_hold_them_all():
    """The first twin of a step refused where the script fails (a twin's own artifact), the second taken: its good
    runs went beside the batch's bad runs, not in a second round after them (the cores hold them, whatever the slots
    the original's memory left)."""
    rounds = []

    def run_good(sources, python, jobs):
        rounds.append(list(sources))
        return [run(None) for _ in sources]

    judge = TwinJudge(lambda s: [False, True], {"py": False}, run_good, lambda r: False, jobs=2, room=16)
    judge.on_rung("every dimension shrunk")
    assert judge(["a\n", "b\n"]) == [False, True]
    assert rounds == [["a\n", "a\n", "b\n", "b\n"]]


@pytest.mark.parametrize("room, jobs", [(16, 4), (2, 4), (16, 1)])
def test_the_next_steps_first_twins_run_beside_a_steps_first_where_the_slots_hold_both(room, jobs):
    """A step refused where the bug is fixed costs no second round where the cores hold both steps' first twins at
    once, and the slots where the script fails hold their runs there: the next step's answers were run beside, kept,
    and taken when it is asked. Where they do not, the steps go one after the other, as before; either way the same
    twin is taken and the same refusal said."""
    bad_rounds, good_rounds, said = [], [], []

    def bad(sources):  # the oracle's cache: a twin run once is answered again without a run
        fresh = [text for text in sources if not any(text in done for done in bad_rounds)]
        if fresh:
            bad_rounds.append(fresh)
        return [True] * len(sources)

    refusing = fixed_world(lambda text: "'vocab_size': 32000" not in text)

    def run_good(sources, python, jobs):
        good_rounds.append(list(sources))
        return refusing(sources, python, jobs)

    judge = TwinJudge(bad, {"py": False}, run_good, lambda r: r.signature == ORIGINAL, jobs, said.append, room)
    traced = RunResult(1, "", "", 1.0, ORIGINAL, "", trace=tuple(RECORDS))
    scaled = try_scale_down(JOB, traced, judge, lambda text: None, judge.on_rung)
    assert scaled is not None and "'vocab_size': 32000" in scaled.source
    assert [r.rung for r in judge.refused] == [ladder(plan_from_trace(RECORDS, JOB))[0].name]
    beside = room >= 16 and jobs >= 2
    assert len(bad_rounds) == (1 if beside else 2) and len(good_rounds) == (1 if beside else 2)
    assert scaled.source in bad_rounds[0] if beside else scaled.source not in bad_rounds[0]
    assert any("judged beside" in line for line in said) is beside


def test_the_next_steps_twins_answers_are_its_own_and_wait_for_it():
    """Judged beside, the next step's twin's answer is not the step's: the step's twin lost the failure, the next
    step's kept it; asked for, the next step's twin runs nowhere again where the bug is fixed (the oracle where the
    script fails keeps its own answers)."""
    rounds, good_rounds = [], []

    def bad(sources):
        rounds.append(list(sources))
        return [text == "next\n" for text in sources]

    def run_good(sources, python, jobs):
        good_rounds.append(list(sources))
        return [run(None) for _ in sources]

    judge = TwinJudge(bad, {"py": False}, run_good, lambda r: False, jobs=2, room=16)
    judge.on_rung("every dimension shrunk", ahead=["next\n"])
    assert judge(["step\n"]) == [False] and rounds == [["step\n", "next\n"]]
    judge.on_rung("dimensions and layers shrunk, vocabularies and token ids kept")
    assert judge(["next\n"]) == [True] and len(good_rounds) == 1


def test_the_ids_the_script_reads_where_the_bug_is_fixed_join_the_plan_and_its_loads_stay_the_failing_runs():
    """A failing run that stopped before its prompts never looked their ids up; the run where the bug is fixed did.
    Merged, the plan maps them into the twin's vocabulary; the passing run's own loads add no second model."""
    from minrepro.reduction.phases.scale_down import merged_trace

    failing = RunResult(1, "", "", 1.0, ORIGINAL, "", trace=tuple(RECORDS))
    passing = RunResult(
        0, "", "", 1.0, None, "", trace=(RECORDS[0], {"event": "token_ids", "ids": [2, 3689, 22335], "table": 32000})
    )
    before, after = plan_from_trace(failing.trace, JOB), plan_from_trace(merged_trace(failing, passing).trace, JOB)
    assert before.ids == {2} and after.ids == {2, 3689, 22335}
    assert len(after.loads) == 1 and set(after.mapping()) == {2, 3689, 22335}
    assert max(after.mapping().values()) < after.vocabulary < 32000


def test_an_adapter_the_script_loads_only_where_the_bug_is_fixed_joins_the_plan_once():
    from minrepro.reduction.phases.scale_down import merged_trace

    adapter = {"event": "peft_from_pretrained", "line": 9, "config_class": "LoraConfig", "peft_config": {"r": 8}}
    adapter |= {"peft_defaults": {"r": 8}}
    failing = RunResult(1, "", "", 1.0, ORIGINAL, "", trace=tuple(RECORDS))
    passing = RunResult(0, "", "", 1.0, None, "", trace=(RECORDS[0], adapter))
    merged = merged_trace(failing, passing)
    assert [r["event"] for r in merged.trace] == ["from_pretrained", "token_ids", "peft_from_pretrained"]
    assert merged_trace(merged, passing).trace == merged.trace  # loads at lines it reached are not added again


def test_a_tokenizer_whose_ids_differ_between_calls_leaves_no_step_with_the_vocabulary_shrunk():
    """A twin runs a tokenizer call no literal holds, and its real ids would fall past a shrunk vocabulary: the
    ladder starts at the vocabularies kept. Text (a chat template not tokenized) indexes nothing."""

    def tokenized(*results):
        return [{"event": "tokenized", "method": "__call__", "line": 9, "result": r} for r in results]

    ids = {"type": "list", "values": [1, 2]}
    live = plan_from_trace([*RECORDS, *tokenized(ids, {"type": "list", "values": [3]})], JOB)
    text = plan_from_trace([*RECORDS, *tokenized({"type": "str", "value": "a"}, {"type": "str", "value": "b"})], JOB)
    same = plan_from_trace([*RECORDS, *tokenized(ids, ids)], JOB)
    assert [r.kept for r in ladder(live)] == [(VOCAB_FIELD,)]
    assert [r.kept for r in ladder(text)] == [(), (VOCAB_FIELD,)]
    assert [r.kept for r in ladder(same)] == [(), (VOCAB_FIELD,)] and same.replaceable


def test_a_tokenizer_the_run_never_reached_leaves_no_step_with_the_vocabulary_shrunk():
    """Where the failing run stopped before the script's tokenizer calls, nothing recorded their ids: a twin runs the
    tokenizer, whose ids are the real vocabulary's. A call replaced by its recorded result, a decode and a chat
    template rendered as text give the model no ids."""
    from minrepro.reducers.scale.ids import unrecorded_tokenizer_calls

    source = (
        "from transformers import AutoTokenizer, pipeline\n"
        "tokenizer = AutoTokenizer.from_pretrained('/ckpt')\n"  # 2
        "class Chat:\n"
        "    def __init__(self, tokenizer):\n"
        "        self.tokenizer = tokenizer\n"
        "    def ask(self, turns):\n"
        "        return self.tokenizer.apply_chat_template(turns, return_tensors='pt')\n"  # 7
        "text = tokenizer.apply_chat_template([], tokenize=False)\n"  # 8
        "ids = tokenizer(text)['input_ids']\n"  # 9
        "words = tokenizer.decode([1, 2])\n"  # 10
        "gen = pipeline('text-generation', model=None, tokenizer=tokenizer)\n"  # 11
    )
    assert unrecorded_tokenizer_calls(source, set()) == [7, 9, 11]
    assert unrecorded_tokenizer_calls(source, {9}) == [7, 11]
    plan = plan_from_trace(RECORDS, JOB + "tok = AutoTokenizer.from_pretrained('/t')\nx = tok.encode('a')\n")
    assert plan.unrecorded and [r.kept for r in ladder(plan)] == [(VOCAB_FIELD,)]


def test_an_adapter_load_the_failing_run_never_reached_onto_a_twin_is_named_by_its_line():
    """`PeftModel.from_pretrained(base, ...)` after the failing call, where `base` (in the call's own function) is a
    load the run recorded: the twin shrinks it and the real adapter does not fit. A load the run recorded (any line
    of a call written over several) is not named, nor one onto a base the run never loaded (it stays real-size)."""
    from minrepro.reducers.scale import unreached_adapter_loads

    source = (
        "from peft import PeftModel\nimport peft\nbase = Auto.from_pretrained('m')\n"
        "first = PeftModel.from_pretrained(\n    base,\n    'a',\n)\n"
        "dispatch(base)\nsecond = peft.PeftModel.from_pretrained(base, 'b')\n"
        "def merged():\n    base = Auto.from_pretrained('m')\n    return PeftModel.from_pretrained(base, 'a')\n"
    )
    recorded = [{"event": "from_pretrained", "line": 3}, {"event": "peft_from_pretrained", "line": 5}]
    assert unreached_adapter_loads(source, recorded) == [9]
    assert unreached_adapter_loads(source, recorded[:1]) == [4, 9]
    assert unreached_adapter_loads(source, [*recorded, {"event": "from_pretrained", "line": 11}]) == [9, 12]
    # a load bound to an attribute names no base, and an adapter onto an expression is not matched to one
    held = "holder.model = Auto.from_pretrained('m')\nPeftModel.from_pretrained(holder.model, 'a')\n"
    assert unreached_adapter_loads(held, [{"event": "from_pretrained", "line": 1}]) == []


def test_a_script_that_loads_its_adapter_after_the_failure_is_planned_from_the_fixed_world_first(tmp_path):
    """Where the bug is fixed the script loads an adapter the failing run never reached: the ladder is tried first
    with what the original read there, not after every step was refused on the real adapter."""
    from minrepro.reduction.phases import scale_down as phase

    source = "from peft import PeftModel\nbase = Auto.from_pretrained('m')\nboom()\nmodel = PeftModel.from_pretrained(base, 'a')\n"
    calls: list[str] = []
    ctx = SimpleNamespace(source=source)
    loaded = ({"event": "from_pretrained", "line": 2},)  # the base: the failing run loaded it, the twin shrinks it
    est = SimpleNamespace(traced=RunResult(1, "", "", 1.0, ORIGINAL, "", trace=loaded))

    def replanned(ctx, est, climb, why):
        calls.append(why)
        return "twin from the fixed world", True

    def build_twin(ctx, est, climb):
        calls.append("as the failing run plans it")
        return None

    climb = phase.Climb(None, None, {"good/python": False})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(phase, "replanned", replanned)
        patch.setattr(phase, "build_twin", build_twin)
        assert phase.climbed(ctx, est, climb) == "twin from the fixed world"
        assert calls == [phase.ADAPTER_LATER]
        calls.clear()
        ctx.source = source.replace("model = PeftModel.from_pretrained(base, 'a')\n", "")
        climb.refused.append("a step refused")
        assert phase.climbed(ctx, est, climb) == "twin from the fixed world"  # planned again once refused
        assert calls == ["as the failing run plans it", phase.EVERY_STEP_REFUSED]
