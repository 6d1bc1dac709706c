"""One focused test per pass that no other test names: a program in, the candidates (or the program the pass leaves)
out. Grouped by the module of `reducers/passes/` the pass lives in."""

from __future__ import annotations

import ast

from minrepro.reducers import Problem
from minrepro.reducers.passes import (
    backward_slice,
    delete_lines,
    drop_all_dead_definitions,
    remove_dead_definitions,
    unwrap_calls,
    unwrap_conditional_expressions,
    unwrap_if,
    unwrap_raise,
    unwrap_try,
)


def _proposals(generate, source: str) -> list[str]:
    return [ast.unparse(tree) for tree in generate(ast.parse(source))]


class _Oracle:
    """A pure-Python oracle that records every program it was asked about."""

    def __init__(self, interesting):
        self.interesting = interesting
        self.asked: list[str] = []

    def __call__(self, batch: list[str]) -> list[bool]:
        self.asked += batch
        return [self.interesting(source) for source in batch]


# --- structure ---------------------------------------------------------------------------------------------


def test_unwrap_try_proposes_the_body_then_the_body_and_its_finally():
    source = "try:\n    x = load()\nfinally:\n    close()\nprint(x)\n"
    assert _proposals(unwrap_try, source) == ["x = load()\nprint(x)", "x = load()\nclose()\nprint(x)"]


def test_unwrap_try_without_finally_proposes_the_body_alone_and_drops_the_handlers():
    source = "try:\n    a()\nexcept ValueError:\n    b()\nelse:\n    c()\n"
    assert _proposals(unwrap_try, source) == ["a()"]


def test_unwrap_if_proposes_each_branch():
    assert _proposals(unwrap_if, "if flag:\n    a()\nelse:\n    b()\n") == ["a()", "b()"]
    assert _proposals(unwrap_if, "if flag:\n    a()\nc()\n") == ["a()\nc()"]  # no `else`: one candidate


def test_unwrap_if_reaches_nested_blocks_one_at_a_time():
    source = "def f():\n    if x:\n        if y:\n            a()\n"
    assert _proposals(unwrap_if, source) == ["def f():\n    if y:\n        a()", "def f():\n    if x:\n        a()"]


def test_unwrap_conditional_expressions_proposes_each_side():
    source = "root = cache if cache else tempfile.mkdtemp()\n"
    assert _proposals(unwrap_conditional_expressions, source) == ["root = cache", "root = tempfile.mkdtemp()"]


def test_unwrap_raise_keeps_the_call_inside_an_exit_and_leaves_other_raises():
    assert _proposals(unwrap_raise, "raise SystemExit(main())\n") == ["main()"]
    assert _proposals(unwrap_raise, "raise ValueError('bad')\n") == []  # no call inside: nothing to keep
    assert _proposals(unwrap_raise, "raise\n") == []


def test_unwrap_calls_proposes_each_plain_argument_of_a_call_statement():
    assert _proposals(unwrap_calls, "sys.exit(main())\n") == ["main()"]
    assert _proposals(unwrap_calls, "report(load(path), *extra)\n") == ["load(path)"]  # a starred one is no statement
    assert _proposals(unwrap_calls, "x = f(g())\n") == []  # an assignment is no call statement


# --- statements --------------------------------------------------------------------------------------------


def test_remove_dead_definitions_proposes_each_unread_definition_without_a_call():
    source = "def unused():\n    pass\nLIMIT = 3\nlog = make_logger()\nused = 1\nprint(used)\n"
    assert _proposals(remove_dead_definitions, source) == [
        "LIMIT = 3\nlog = make_logger()\nused = 1\nprint(used)",
        "def unused():\n    pass\nlog = make_logger()\nused = 1\nprint(used)",
    ]  # `log = make_logger()` calls something (which may act), `used` is read


def test_drop_all_dead_definitions_takes_every_dead_definition_in_one_candidate_per_round():
    source = (
        "import os\ndef helper():\n    return 1\ndef caller():\n    return helper()\n"
        "path = os.getcwd()\npath = path\nprint(path)\n"
    )
    oracle = _Oracle(lambda s: "print(path)" in s)
    problem = Problem(source, oracle)
    drop_all_dead_definitions(problem)
    assert problem.current == "import os\npath = os.getcwd()\nprint(path)\n"
    # `caller` and the no-op `path = path` first; `helper`, read only by `caller`, once it is gone
    assert len(oracle.asked) == 2
    assert "def caller" not in oracle.asked[0] and "def helper" in oracle.asked[0]
    assert "path = path" not in oracle.asked[0]


def test_drop_all_dead_definitions_keeps_the_program_where_the_candidate_is_refused():
    source = "def helper():\n    return 1\nprint(2)\n"
    oracle = _Oracle(lambda s: False)
    problem = Problem(source, oracle)
    drop_all_dead_definitions(problem)
    assert problem.current == source and oracle.asked == ["print(2)\n"]


def test_delete_lines_keeps_the_lines_the_failure_needs_and_never_asks_about_a_program_that_does_not_parse():
    source = "def unused():\n    return 1\n@cache\ndef f():\n    return 2\na = 1\nb = 2\nprint(a, f())\n"
    oracle = _Oracle(lambda s: "print(a, f())" in s)
    problem = Problem(source, oracle)
    delete_lines(problem)
    # `a = 1` and `f` stay: without them `print` reads an unbound name; the decorator is a line, not a statement
    assert problem.current == "def f():\n    return 2\na = 1\nprint(a, f())\n"
    for asked in oracle.asked:
        ast.parse(asked)  # `    return 1` without its `def` is skipped, not judged


# --- profiled ----------------------------------------------------------------------------------------------


def test_backward_slice_keeps_what_the_failing_statement_reads_a_kept_object_and_the_seeds():
    source = "import torch\na = 1\nb = 2\ntorch.manual_seed(0)\nm = make(a)\nm.eval()\nprint('loading')\nout = m(a)\n"
    body = ast.parse(source).body
    kept = backward_slice(body, len(body) - 1)
    # `b = 2` and `print(...)` touch nothing the failure reads; `m.eval()` may change `m`; the seed writes global state
    assert [ast.unparse(body[i]) for i in kept] == [
        "import torch",
        "a = 1",
        "torch.manual_seed(0)",
        "m = make(a)",
        "m.eval()",
        "out = m(a)",
    ]


def test_backward_slice_keeps_the_module_docstring_a_parser_reads():
    body = ast.parse(
        '"""Evaluate an adapter."""\nimport argparse\np = argparse.ArgumentParser(description=__doc__)\n'
    ).body
    assert backward_slice(body, 2) == [0, 1, 2]
    body = ast.parse('"""Evaluate an adapter."""\nimport argparse\np = argparse.ArgumentParser()\n').body
    assert backward_slice(body, 2) == [1, 2]


def test_the_reads_written_back_are_the_reads_the_profile_records():
    """The profile's rule (the bootstrap's `read_key`) says which reads it records, by their source; the search finds
    the reads of a program by that source alone, without the harness: the same reads, in the same order."""
    from minrepro.harness._bootstrap import read_key
    from minrepro.reducers.passes.profiled import _recorded_reads

    source = (
        "import sys, json, configparser\nargs = parser.parse_args()\ncfg = json.load(open(args.config))\n"
        "m = configparser.ConfigParser()['model']\nsteps = args.steps\nseed = cfg['eval']['seed']\n"
        "layers = m.getint('layers')\nkind = cfg['q'].get('type', 'nf4')\ndyn = m.get(name)\nmade = make().get('x')\n"
        "fallback = m.getint('x', fallback=1)\nfirst = sys.argv[1]\ntext = Path(args.path).read_text()\n"
        "cfg['a']['b'] = 2\nargs.lr = 3\ndel cfg['old']\nmodel.to(device)\n"
    )
    recorded = list(dict.fromkeys(k for k in map(read_key, ast.walk(ast.parse(source))) if k is not None))
    assert {
        "args.steps",
        "cfg['eval']['seed']",
        "m.getint('layers')",
        "sys.argv[1]",
        "json.load(open(args.config))",
    } <= (set(recorded))
    assert "m.get(name)" not in recorded and "model.to(device)" not in recorded
    assert _recorded_reads(source, dict.fromkeys(recorded, "1")) == recorded
    # a value whose source the program only writes to, or deletes, is no read of it
    assert _recorded_reads("args.lr = 3\ndel cfg['old']\n", {"args.lr": "1", "cfg['old']": "1"}) == []


def test_the_search_and_the_profile_name_the_same_file_readers():
    from minrepro.harness import _bootstrap
    from minrepro.reducers.passes import profiled

    assert profiled.FILE_READERS == _bootstrap.FILE_READERS


def test_flatten_instances_gives_an_attribute_set_once_and_read_elsewhere_a_name_of_its_own():
    import ast

    from minrepro.reducers.passes import flatten_instances

    source = (
        "class Q:\n    def __init__(self, a):\n        pass\n"
        "server = Q(1)\nserver._offload = make()\nuse(server._offload.name)\n"
    )
    proposals = [ast.unparse(t) for t in flatten_instances(ast.parse(source))]
    assert any("offload = make()" in p and "use(offload.name)" in p and "server._offload" not in p for p in proposals)
    taken = "class Q:\n    pass\nserver = Q()\nserver.x = 1\nserver.x = 2\nx = 0\nuse(server.x)\n"
    assert not any("use(x)" in ast.unparse(t) for t in flatten_instances(ast.parse(taken)))  # set twice; x is taken


def test_merge_module_imports_reads_the_modules_names_through_its_from_import():
    import ast

    from minrepro.reducers.passes import merge_module_imports

    source = (
        "from transformers import AutoModel\nimport transformers\n"
        "twin = transformers.LlamaForCausalLM(transformers.AutoConfig.for_model('llama'))\nAutoModel.x(twin)\n"
    )
    (merged,) = [ast.unparse(t) for t in merge_module_imports(ast.parse(source))]
    assert merged.splitlines()[0] == "from transformers import AutoModel, AutoConfig, LlamaForCausalLM"
    assert "import transformers" not in merged and "twin = LlamaForCausalLM(AutoConfig.for_model('llama'))" in merged
    kept = [
        "from transformers import AutoModel\nimport transformers\nAutoConfig = 1\ntransformers.AutoConfig()\n",
        "from transformers import AutoModel\nimport transformers\nf(transformers)\n",  # the module itself is read
        "import transformers\ntransformers.AutoConfig()\nfrom transformers import AutoModel\n",  # read before it
        "import transformers\ntransformers.AutoConfig()\n",  # no from-import: no line to save
    ]
    assert all(not list(merge_module_imports(ast.parse(s))) for s in kept)


# --- vocabularies ------------------------------------------------------------------------------------------


def test_shrink_twin_vocabularies_keeps_the_scripts_own_vocabulary_and_leaves_a_script_without_a_twin():
    from minrepro.reducers.passes import shrink_twin_vocabularies

    twin = (
        "import transformers\n"
        "twin = transformers.LlamaForCausalLM(transformers.AutoConfig.for_model('llama', **{'vocab_size': 32000, "
        "'hidden_size': 64, 'pad_token_id': 31999}))\n"
    )
    (shrunk,) = _proposals(shrink_twin_vocabularies, twin + "ids = torch.tensor([[1, 29871, 31999]])\n")
    config = ast.literal_eval(shrunk.split("**", 1)[1].split("))", 1)[0])
    assert config["vocab_size"] == 256 and config["pad_token_id"] < 256 and config["hidden_size"] == 64
    assert "torch.tensor([[1, 0, " + str(config["pad_token_id"]) + "]])" in shrunk  # one id, one small id
    # the script's own numbers ask for 4096 (`random.randrange(3, VOCAB)`): the twin keeps that many
    (floored,) = _proposals(shrink_twin_vocabularies, twin + "VOCAB = 4096\n")
    assert "'vocab_size': 4096" in floored
    assert not _proposals(shrink_twin_vocabularies, twin + "VOCAB = 32000\n")  # as large as the twin's
    assert not _proposals(shrink_twin_vocabularies, twin.replace("32000", "256"))  # small already
    assert not _proposals(shrink_twin_vocabularies, "config = {'vocab_size': 32000}\nload(config)\n")  # no twin
