"""The command line end to end, on a synthetic catalog of tiny scripts (no heavy libraries)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minrepro.cli import main

ROOT = Path(__file__).resolve().parents[1]
SETS = (ROOT / "minrepro/envs/sets.toml").read_text()


def _case(case_id: str, script: str, signature: str) -> str:
    # fixed_in far in the future: with no named set installed, the case is expected to fail
    return textwrap.dedent(f'''
        [[case]]
        id = "{case_id}"
        script = "{script}"
        family = "T"
        device = "cpu"
        signature = "{signature}"
        pinned = "fail"
        newest = "fail"
        fixed_in = ["packaging==999.0"]
        upstream = []
    ''')


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    (tmp_path / "boom.py").write_text("raise ValueError('boom 12')\n")
    (tmp_path / "quiet.py").write_text("print('nothing wrong')\n")
    (tmp_path / "other.py").write_text("{}['k']\n")
    path = tmp_path / "catalog.toml"
    path.write_text(
        SETS
        + _case("boom", "boom.py", "ValueError: boom")
        + _case("quiet", "quiet.py", "X")
        + _case("other", "other.py", "ValueError")
    )
    return path


def test_run_judges_each_case_against_the_manifest(manifest, capsys):
    assert main(["--manifest", str(manifest), "run", "boom"]) == 0
    assert "as declared" in capsys.readouterr().out
    assert main(["--manifest", str(manifest), "run", "--json"]) == 1
    document = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    verdicts = {c["case"]: (c["observed"], c["verdict"]) for c in document["cases"]}
    assert verdicts == {
        "boom": ("fail", "as declared"),
        "quiet": ("pass", "differs"),
        "other": ("fail-other", "differs"),
    }


def test_results_file_feeds_the_matrix(manifest, tmp_path, capsys):
    results = tmp_path / "results"
    main(["--manifest", str(manifest), "run", "boom", "--results", str(results / "x.json")])
    doc = json.loads((results / "x.json").read_text())
    from minrepro.catalog.manifest import load_catalog
    from minrepro.harness.probe import probe

    # the set this interpreter's libraries match (none without them; `nox -s tests` installs the pinned set)
    assert doc["set"] == load_catalog(manifest).detect_set(probe(None).versions)
    assert doc["cases"][0]["signature"]["type"] == "ValueError"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "no-such-case"], "unknown case id: no-such-case"),
        (["run", "--python", "/nonexistent/python"], "interpreter not found"),
        (["--manifest", "/nonexistent/catalog.toml", "list"], "cannot read manifest"),
        (["scenario", "matrix", "r06-peft-device-map"], "scenario matrix takes no presets"),
        (["scenario", "matrix", "--check"], "--check needs --readme"),
        (["scenario", "list", "--readme", "README.md"], "are for `minrepro scenario matrix`"),
        (["check", "--patched"], "--patched runs in the sets' envs: name them with --set"),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_signature_of_a_passing_script_says_nothing_to_sign(tmp_path, capsys):
    script = tmp_path / "fine.py"
    script.write_text("print(1)\n")
    assert main(["signature", str(script)]) == 2
    assert "does not fail" in capsys.readouterr().err


def test_signature_with_placement_says_what_a_pass_stood_on(tmp_path, capsys):
    # a pass proves nothing until it says which branch it reached: --placement prints it instead of refusing
    script = tmp_path / "fine.py"
    script.write_text("print(1)\n")
    assert main(["signature", str(script), "--placement"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("passed (exit 0 in") and out[1] == "no model load or dispatch was traced"
    assert main(["signature", str(script), "--placement", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace"] == []


def test_signature_command_prints_the_owner(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text("from packaging.version import Version\nVersion('a b')\n")
    assert main(["signature", str(script), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["owner"].startswith("packaging.version:")


def test_readme_matrix_is_generated_from_recorded_results():
    # The README's matrix must be exactly what `minrepro matrix` renders from results/.
    assert (
        main(["matrix", "--results", str(ROOT / "results"), "--readme", str(ROOT / "docs" / "catalog.md"), "--check"])
        == 0
    )


def test_readme_scenario_tables_are_generated_from_recorded_results():
    assert (
        main(
            [
                "scenario",
                "matrix",
                "--from",
                str(ROOT / "results" / "scenarios"),
                "--readme",
                str(ROOT / "docs" / "scenarios.md"),
                "--check",
            ]
        )
        == 0
    )


def test_an_os_error_is_one_line(tmp_path, capsys):
    # a full disk or a missing directory: a line, not a traceback
    assert main(["matrix", "--readme", str(tmp_path / "missing" / "README.md")]) == 1
    err = capsys.readouterr().err.strip()
    assert "No such file" in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "minrepro", "list"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and "quant-state-meta-item" in proc.stdout


def test_static_checks_pass_for_the_bundled_catalog(capsys):
    assert main(["check"]) == 0


def test_a_relative_envs_directory_is_taken_from_where_the_command_ran(tmp_path, monkeypatch):
    import argparse

    from minrepro.cli.envs import _envs

    # `patch prove --envs .minrepro/envs` handed the relative path on to processes run elsewhere: "No such file"
    monkeypatch.chdir(tmp_path)
    assert _envs(argparse.Namespace(envs=".minrepro/envs")) == tmp_path.resolve() / ".minrepro" / "envs"


def test_check_patched_runs_a_script_beside_its_twin_with_the_patches(tmp_path, monkeypatch, capsys):
    """`check SCRIPT --set S --patched`: one column per env, the patched run recorded apart (with the patches it
    had) so that the matrix and `report` keep reading the set's own runs."""
    import venv

    import minrepro.cli.catalog as cli_catalog
    from minrepro.envs.venvs import env_python, write_marker

    twin = tmp_path / "twin"  # stands in for the set's patched env: a module there makes the script pass
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(twin)
    site = next(twin.glob("lib/python*/site-packages"))
    (site / "fixed_here.py").write_text("")
    write_marker(twin, {"created_by": "minrepro", "patches": ["lib/a-fix.diff"]})
    monkeypatch.setattr(
        cli_catalog,
        "set_env",
        lambda catalog, name, patched=False, note=None: env_python(twin) if patched else Path(sys.executable),
    )
    script = tmp_path / "user.py"
    script.write_text(
        "# /// script\n# dependencies = []\n# ///\nimport importlib\n\n"
        "importlib.import_module('fixed_here')\nprint('ok')\n"
    )
    assert main(["check", str(script), "--set", "newest", "--patched", "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "| target | newest | newest + patches |" in out
    assert "| user | fail-other: ModuleNotFoundError" in out or "| user | fail: ModuleNotFoundError" in out
    assert out.rstrip().splitlines()[-3].endswith("| pass |")
    patched = json.loads(next((tmp_path / "r" / "patched").glob("newest-*.json")).read_text())
    assert patched["patches"] == ["lib/a-fix.diff"] and patched["cases"][0]["observed"] == "pass"
    assert json.loads(next((tmp_path / "r").glob("newest-*.json")).read_text())["cases"][0]["observed"] != "pass"
