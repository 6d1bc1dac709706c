"""Scripts as users run them: arguments after --, the files a script reads, notebooks, environment variables,
`-m` and launcher command lines, and input that is no library failure. End to end on small scripts whose failure
passes through an installed library (`packaging`, `yaml`), so no heavy libraries are needed."""

from __future__ import annotations

import json
import keyword
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minrepro.cli import main
from minrepro.errors import MinreproError
from minrepro.inputs import (
    absolute_arguments,
    absolute_paths,
    insert_prelude,
    Invocation,
    prepare,
    read_python,
    record_env,
    split_arguments,
)
from minrepro.reducers.source import code_lines

nbformat = pytest.importorskip("nbformat")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINREPRO_CACHE", str(tmp_path / "cache"))


def reduce(tmp_path, capsys, *argv) -> dict:
    assert main(["reduce", "--json", "--workdir", str(tmp_path / "work"), *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


ARGPARSE_JOB = '''\
"""Checks a release string from the command line against a JSON config."""
import argparse
import json
import logging

from packaging.version import Version

log = logging.getLogger("job")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--tolerance", type=float, default=0.5)
    args = parser.parse_args()
    with open(args.config) as fh:
        cfg = json.load(fh)
    log.info("checking %s at %s", args.release, args.tolerance)
    if cfg["check"]["enabled"]:
        Version(cfg["check"]["prefix"] + args.release)


if __name__ == "__main__":
    main()
'''


def test_arguments_and_a_config_file_become_literals(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text(ARGPARSE_JOB)
    (tmp_path / "cfg.json").write_text(json.dumps({"check": {"enabled": True, "prefix": "1.0 ", "lr": 2e-4}}))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    summary = reduce(
        tmp_path, capsys, "job.py", "--", "--release", "beta", "--config", "cfg.json", "--tolerance", "0.25"
    )
    out = (tmp_path / "job.min.py").read_text()
    assert Path(summary["output"]) == tmp_path / "job.min.py"
    assert "# Original command: python job.py --release beta --config cfg.json --tolerance 0.25" in out
    body = out.split("# Guard:")[1]
    assert "Version(" in body and "'beta'" in body
    for gone in ("sys.argv", "argparse", "open(", "cfg.json", "json"):
        assert gone not in body, gone
    assert summary["output_lines"] <= 3
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before  # nothing modified


def test_a_file_the_failure_depends_on_stays_and_the_header_says_so(tmp_path, capsys, monkeypatch):
    pytest.importorskip("yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    (tmp_path / "job.py").write_text(
        "import sys\nimport yaml\n\nwith open(sys.argv[1]) as fh:\n    settings = yaml.safe_load(fh)\nprint(settings)\n"
    )
    reduce(tmp_path, capsys, "job.py", "--", "bad.yaml")
    out = (tmp_path / "job.min.py").read_text()
    where = str((tmp_path / "bad.yaml").resolve())
    assert f"# Opens {where}: the failure depends on it" in out
    assert where in out.split("# Guard:")[1]


def test_a_plain_script_is_not_prepared(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("from packaging.version import Version\nVersion('a b')\n")
    assert prepare(str(script), run=Invocation(cwd=tmp_path, environ={})) is None


def test_the_prelude_goes_after_the_docstring_and_future_imports():
    source = '"""Doc."""\nfrom __future__ import annotations\nimport os\n'
    text = insert_prelude(source, ["import sys", "sys.argv = ['a']"])
    assert text == '"""Doc."""\nfrom __future__ import annotations\nimport sys\nsys.argv = [\'a\']\nimport os\n'
    compile(text, "x", "exec")


def test_the_prelude_goes_after_a_leading_comment_block():
    source = "#!/usr/bin/env python\n# /// script\n# dependencies = []\n# ///\nimport os\n"
    assert insert_prelude(source, ["import sys"]).endswith("# ///\nimport sys\nimport os\n")


def test_relative_config_paths_become_absolute_in_arguments_and_calls(tmp_path):
    (tmp_path / "cfg.yaml").write_text("a: 1\n")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    (tmp_path / "notes.md").write_text("not a config")
    args, files = absolute_arguments(
        ["--config", "cfg.yaml", "--model=ckpt", "--out", "out.yaml", "notes.md", "4"], tmp_path
    )
    assert args == [
        "--config",
        str(tmp_path / "cfg.yaml"),
        f"--model={tmp_path / 'ckpt'}",
        "--out",
        "out.yaml",
        "notes.md",
        "4",
    ]
    assert files == [str(tmp_path / "cfg.yaml"), str(tmp_path / "ckpt")]
    source = 'cfg = load(open("cfg.yaml"))  # é\nd = cfg["cfg.yaml"]\np.add_argument("--c", default="cfg.yaml")\n'
    text, named = absolute_paths(source, tmp_path)
    assert text.splitlines()[0] == f"cfg = load(open({str(tmp_path / 'cfg.yaml')!r}))  # é"
    assert text.splitlines()[1] == 'd = cfg["cfg.yaml"]'  # a key, not a path
    assert str(tmp_path / "cfg.yaml") in text.splitlines()[2] and len(named) == 2


def test_split_arguments_at_the_first_double_dash():
    assert split_arguments(["reduce", "job.py", "--", "--x", "--", "y"]) == (["reduce", "job.py"], ["--x", "--", "y"])
    assert split_arguments(["reduce", "job.py"]) == (["reduce", "job.py"], [])


def test_arguments_after_double_dash_are_refused_where_no_script_takes_them(capsys):
    assert main(["list", "--", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "arguments after -- are a script's" in err and len(err.splitlines()) == 1


def test_signature_and_check_take_the_arguments(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text("import sys\nfrom packaging.version import Version\nVersion(sys.argv[1])\n")
    assert main(["signature", "job.py", "--", "1.0 beta"]) == 0
    assert "InvalidVersion" in capsys.readouterr().out
    assert main(["check", "job.py", "--python", sys.executable, "--", "1.0 beta"]) in (0, 1)
    assert "job" in capsys.readouterr().out


def test_bisect_takes_the_arguments_and_asks_for_pins(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text("import sys\nfrom packaging.version import Version\nVersion(sys.argv[1])\n")
    assert main(["bisect", "job.py", "--package", "packaging", "--python", sys.executable, "--", "1.0 beta"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the reference run's progress line
    assert last.startswith("minrepro: error: job.py pins no versions")


# --- environment variables ---------------------------------------------------------------------------


def test_the_runs_variables_are_sorted_into_moved_held_and_secret():
    moved, held = record_env(
        {
            "CUDA_VISIBLE_DEVICES": "0",
            "OMP_NUM_THREADS": "3",
            "HF_HOME": "/h",
            "HF_TOKEN": "s3",
            "PATH": "/bin",
            "MINREPRO_CACHE": "/c",
            "PYTORCH_CUDA_ALLOC_CONF": "x",
        }
    )
    assert moved == {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "3", "PYTORCH_CUDA_ALLOC_CONF": "x"}
    assert held == {"HF_HOME": "/h", "HF_TOKEN": "(set; not recorded)"}


def test_a_variable_the_failure_does_not_need_is_named_in_the_header_only(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("HF_TOKEN", "do-not-write")
    script = tmp_path / "job.py"
    script.write_text("import os\nfrom packaging.version import Version\nVersion('1.0 beta')\n")
    reduce(tmp_path, capsys, str(script))
    out = (tmp_path / "job.min.py").read_text()
    assert "# The run also had: HF_TOKEN=(set; not recorded), TOKENIZERS_PARALLELISM=false" in out
    assert "os.environ" not in out and "do-not-write" not in out


def test_a_variable_the_failure_needs_is_set_at_the_top(tmp_path, monkeypatch):
    monkeypatch.setenv("BNB_RELEASE", "1.0 beta")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # torch sets it in a process that ran a model
    script = tmp_path / "job.py"
    script.write_text("import os\nfrom packaging.version import Version\nVersion(os.environ['BNB_RELEASE'])\n")
    prepared = prepare(str(script), run=Invocation(cwd=tmp_path))
    assert "os.environ['BNB_RELEASE'] = '1.0 beta'" in prepared.source
    body = "import os\nos.environ['BNB_RELEASE'] = '1.0 beta'\nVersion(os.environ['BNB_RELEASE'])\n"
    assert not any(line.startswith("The run also had") for line in prepared.header(body))
    assert prepared.header("Version('1.0 beta')\n")[1] == "The run also had: BNB_RELEASE=1.0 beta"


# --- refusals -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x7fELF\x02\x01\x00\x00binary", "is not Python source: it holds binary data"),
        (
            json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode(),
            "is not Python source: it holds a Jupyter notebook's JSON",
        ),
        (b'[{"a": null}]', "is not Python source: it holds JSON data"),
        (b"caf\xe9 = 1\n", "is not UTF-8 text"),
    ],
)
def test_a_file_that_is_not_python_source_is_refused(tmp_path, capsys, content, message):
    script = tmp_path / "job.py"
    script.write_bytes(content)
    assert main(["reduce", str(script), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    with pytest.raises(MinreproError, match=r"not Python source|not UTF-8"):
        read_python(script)


@pytest.mark.parametrize(
    "body, message",
    [
        ("import packaging\nprint(undefined_name)\n", "NameError: name 'undefined_name' is not defined"),
        ("import my_missing_helpers\n", "ModuleNotFoundError: No module named 'my_missing_helpers'"),
        ("from packaging.version import NoSuchThing\n", "ImportError: cannot import name 'NoSuchThing'"),
        ("import json\nsettings = json.load(open('settings.json'))\n", "FileNotFoundError"),
    ],
)
def test_a_failure_of_the_scripts_own_text_is_refused(tmp_path, capsys, body, message):
    script = tmp_path / "job.py"
    script.write_text(body)
    assert main(["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    if "ModuleNotFoundError" in message:  # the refusal of a missing import, which names the module
        assert "cannot import my_missing_helpers" in err
    else:
        assert "fails in its own code" in err and message in err and "not a library failure" in err
    assert main(["signature", str(script)]) == 2
    assert "fails in its own code" in capsys.readouterr().err or "cannot import" in err


def test_a_users_assertion_about_a_librarys_result_stays_a_failure(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(
        "import logging\nfrom packaging.version import Version\nlogging.info('start')\n"
        "v = Version('1.0.post1')\nassert v.is_postrelease is False, 'a post release'\n"
    )
    summary = reduce(tmp_path, capsys, str(script))
    assert summary["signature"].startswith("AssertionError")


def test_a_missing_argument_file_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.py").write_text(ARGPARSE_JOB)
    assert (
        main(
            [
                "reduce",
                "job.py",
                "--workdir",
                str(tmp_path / "w"),
                "--executor",
                "cold",
                "--",
                "--release",
                "beta",
                "--config",
                "nowhere.json",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "FileNotFoundError" in err and "nowhere.json" in err and len(err.splitlines()) == 1


# --- notebooks ----------------------------------------------------------------------------------------


def notebook(path: Path, cells: list[tuple[str, str]], outputs: bool = True) -> Path:
    nb = nbformat.v4.new_notebook()
    for kind, text in cells:
        if kind == "code":
            cell = nbformat.v4.new_code_cell(text)
            if outputs:
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="noise\n")]
            nb.cells.append(cell)
        else:
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
    nbformat.write(nb, str(path))
    return path


COLAB = [
    ("markdown", "# Checking releases"),
    ("code", "!pip install -q packaging==24.0\n%pip install pyyaml\n%env RELEASE_CHANNEL=beta\n%matplotlib inline"),
    ("code", "import os\nfrom packaging.version import Version\n!nvidia-smi"),
    ("code", "%%time\nchannel = os.environ['RELEASE_CHANNEL']\ndisplay(channel)"),
    ("code", "%time text = '1.0 ' + channel\nVersion(text)"),
]


def test_a_notebook_reduces_to_a_script_beside_it(tmp_path, capsys):
    path = notebook(tmp_path / "explore.ipynb", COLAB)
    before = path.read_bytes()
    summary = reduce(tmp_path, capsys, str(path))
    out = tmp_path / "explore.min.py"
    assert Path(summary["output"]) == out and path.read_bytes() == before
    text = out.read_text()
    assert "# reduced by minrepro from explore.ipynb" in text
    assert "From the notebook explore.ipynb: its 4 code cells in order, outputs ignored." in text
    assert "`!pip install -q packaging==24.0` (an install)" in text and "`%matplotlib inline` (display)" in text
    assert "`!nvidia-smi` (a shell command)" in text
    body = text.split("# Guard:")[1]
    assert "Version(" in body and "display" not in body and "!" not in body
    assert "display() is print()" not in text  # the output has no display() left
    assert summary["output_lines"] <= 3


def test_check_and_signature_take_a_notebook(tmp_path, capsys):
    path = notebook(tmp_path / "explore.ipynb", COLAB)
    assert main(["signature", str(path)]) == 0
    assert "InvalidVersion" in capsys.readouterr().out
    assert main(["check", str(path), "--python", sys.executable]) in (0, 1)
    assert capsys.readouterr().out.startswith("explore")


def test_magics_become_python_or_are_dropped():
    from minrepro.inputs.notebook import convert

    out = convert([(1, "%env A=1\n%env B 2\n%env\nif x:\n    !pip install y\n%timeit -n 3 -r 2 f()")], "nb")
    assert out.source.splitlines()[1:] == [
        "os.environ['A'] = '1'",
        "os.environ['B'] = '2'",
        "",
        "if x:",
        "    pass",
        "f()",
    ]
    assert out.sets_env and len(out.dropped) == 2


@pytest.mark.parametrize(
    "cell, message",
    [
        ("%run other.py", "cell 1: `%run` changes what runs"),
        ("%load_ext autoreload", "cell 1: `%load_ext` changes what runs"),
        ("%%bash\necho hi", "cell 1: the cell magic `%%bash` runs something other than the cell's Python"),
        ("%%writefile helper.py\nx = 1", "cell 1: the cell magic `%%writefile`"),
        ("%frobnicate 3", "cell 1: unknown magic `%frobnicate`"),
        ("files = !ls", "cell 1: `files = !ls` assigns what a shell command or magic prints"),
        ("get_ipython().run_line_magic('x', '')", "cell 1 calls get_ipython()"),
        ("pip install x", "cell 1 is not Python once its magics are read"),
    ],
)
def test_a_magic_that_changes_what_runs_is_refused_naming_the_cell(tmp_path, capsys, cell, message):
    path = notebook(tmp_path / "nb.ipynb", [("code", cell)])
    assert main(["reduce", str(path), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_malformed_notebook_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    assert main(["reduce", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a readable notebook" in err and len(err.splitlines()) == 1
    assert main(["signature", str(tmp_path / "missing.ipynb")]) == 2
    assert "no such notebook" in capsys.readouterr().err


PLAIN_LINE = st.from_regex(r"[a-z_]{1,8} = [1-9][0-9]{0,3}", fullmatch=True).filter(
    lambda line: not keyword.iskeyword(line.split(" = ")[0])  # `as = 1` is no Python
)
MAGIC_LINE = st.sampled_from(["!pip install x", "%pip install y", "%matplotlib inline", "!ls -la", "%config X=1"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(PLAIN_LINE, MAGIC_LINE), min_size=1, max_size=6), min_size=1, max_size=5))
def test_every_code_line_of_the_cells_stays_in_order(cells):
    from minrepro.inputs.notebook import convert

    numbered = [(i, "\n".join(lines)) for i, lines in enumerate(cells, 1)]
    out = convert(numbered, "nb")
    plain = [line for lines in cells for line in lines if not line.startswith(("!", "%"))]
    kept = [line for line in out.source.splitlines() if line and not line.startswith("# cell")]
    assert kept == plain
    assert len(out.dropped) == sum(line.startswith(("!", "%")) for lines in cells for line in lines)


# --- launchers ----------------------------------------------------------------------------------------


def test_a_module_run_with_dash_m(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    package = tmp_path / "relcheck"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("PREFIX = '1.0 '\n")
    (package / "run.py").write_text(
        "import sys\nfrom packaging.version import Version\n\nfrom .helpers import PREFIX\n"
        "\n\ndef check(text):\n    return Version(PREFIX + text)\n\n\ncheck(sys.argv[1])\n"
    )
    summary = reduce(tmp_path, capsys, "-m", "relcheck.run", "--", "beta")
    out = tmp_path / "run.min.py"
    assert Path(summary["output"]) == out
    text = out.read_text()
    assert "# reduced by minrepro from -m relcheck.run" in text
    assert "# Original command: python -m relcheck.run beta" in text
    assert "Version(" in text.split("# Guard:")[1]


def test_a_command_line_after_double_dash(tmp_path):
    (tmp_path / "job.py").write_text("import sys\nfrom packaging.version import Version\nVersion(sys.argv[1])\n")
    prepared = prepare(None, run=Invocation(["python", str(tmp_path / "job.py"), "1.0 beta"], tmp_path, {}))
    assert prepared.name == "job.py" and "sys.argv = ['job.py', '1.0 beta']" in prepared.source
    with pytest.raises(MinreproError, match="give the script"):
        prepare(None, run=Invocation(["python", "-u", "job.py"], tmp_path, {}))


@pytest.mark.libs
def test_accelerate_launch_with_one_process(tmp_path):
    (tmp_path / "train.py").write_text(
        "import sys\nfrom accelerate import Accelerator\nacc = Accelerator()\nprint(acc.device, sys.argv[1:])\n"
    )
    prepared = prepare(
        None,
        python=sys.executable,
        run=Invocation(
            ["accelerate", "launch", "--cpu", "--num_processes", "1", str(tmp_path / "train.py"), "--lr", "3"],
            tmp_path,
            {},
        ),
    )
    assert prepared.env["ACCELERATE_USE_CPU"] == "True" and "sys.argv = ['train.py', '--lr', '3']" in prepared.source
    assert prepared.command.startswith("accelerate launch --cpu")
    with pytest.raises(MinreproError, match="2 processes"):
        prepare(
            None,
            python=sys.executable,
            run=Invocation(
                ["accelerate", "launch", "--cpu", "--num_processes", "2", str(tmp_path / "train.py")], tmp_path, {}
            ),
        )


def test_prepared_scripts_go_to_the_cache_not_beside_the_input(tmp_path):
    (tmp_path / "job.py").write_text("import sys\nprint(sys.argv)\n")
    prepared = prepare(str(tmp_path / "job.py"), run=Invocation(["x"], tmp_path, {}))
    assert prepared.path.is_relative_to(tmp_path / "cache") and sorted(p.name for p in tmp_path.iterdir()) == [
        "cache",
        "job.py",
    ]
    assert code_lines(prepared.source) == 4


def test_the_header_names_no_path_of_the_machine_the_run_was_on(tmp_path):
    # a reduced E4B job's header said `Original command: python /tmp/w/reduce/.../eval_gemma4_gpu.py` and
    # `The run also had: CUDA_HOME=/usr/local/cuda`
    from minrepro.inputs import Prepared

    home = tmp_path / "job"
    prepared = Prepared(
        "eval.py",
        tmp_path / "p.py",
        "",
        home,
        tmp_path / "eval.min.py",
        f"python {home / 'eval.py'} --config {home / 'cfg' / 'a.yaml'} --steps 2",
        held={"CUDA_HOME": "/usr/local/cuda", "OMP_NUM_THREADS": "4"},
    )
    header = "\n".join(prepared.header("x = 1\n"))
    assert "Original command: python eval.py --config cfg/a.yaml --steps 2" in header
    assert "CUDA_HOME," in header + "," and "/usr/local/cuda" not in header and "OMP_NUM_THREADS=4" in header
    assert str(tmp_path) not in header


@pytest.mark.libs
def test_a_load_keeps_its_script_line_when_the_script_sets_its_own_argv(tmp_path):
    # a prepared script begins with `sys.argv = [...]`: the trace looked for sys.argv[0]'s frames, found none, and the
    # scale-down had no line to rewrite (no twin; the output kept opening the user's checkpoint)
    from transformers import LlamaConfig, LlamaForCausalLM

    from minrepro.harness.runner import run_script

    LlamaForCausalLM(
        LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            vocab_size=64,
        )
    ).save_pretrained(tmp_path / "ckpt")
    script = tmp_path / "job.py"
    script.write_text(
        f"import sys\nsys.argv = ['job.py', '--x', '1']\nfrom transformers import AutoModelForCausalLM\n"
        f"model = AutoModelForCausalLM.from_pretrained({str(tmp_path / 'ckpt')!r})\n"
    )
    run = run_script(script, trace=True, timeout=300)
    loads = [r for r in run.trace if r.get("event") == "from_pretrained"]
    assert loads and all(r["line"] == 4 for r in loads), loads
