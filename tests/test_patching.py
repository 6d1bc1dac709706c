"""Patches: headers and ids are consistent with the catalog; application is whole-or-nothing, reversible,
and refused outside minrepro-created environments."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minrepro.envs import patching, venvs as envs
from minrepro.catalog.manifest import load_catalog
from minrepro.errors import MinreproError

needs_gnu_patch = pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 21))
DIFF = """Subject: [PATCH] demo: change line 10
Case: demo-case
Made-against: demo==1.0
Applies-to: demo==1.0, demo==1.1

Body.
---
--- a/src/demo/mod.py
+++ b/src/demo/mod.py
@@ -8,5 +8,5 @@
 line 8
 line 9
-line 10
+line ten
 line 11
 line 12
"""


def test_every_patch_has_a_header_and_every_case_patch_resolves():
    patches = patching.load_patches()
    assert patches, "patches/ is empty"
    ids = {p.id for p in patches}
    for patch in patches:
        assert patch.made_against.split("==")[0] == patch.library, patch.path
        assert patch.made_against in patch.applies_to, f"{patch.path}: not stated to apply to its own release"
        assert patch.files and all(f.startswith(patch.library + "/") for f in patch.files), patch.path
    catalog = load_catalog()
    for case in catalog.cases:
        assert set(case.patches) <= ids, f"{case.id}: unknown patch ids {set(case.patches) - ids}"


def test_live_cases_have_a_patch_for_the_newest_release():
    catalog = load_catalog()
    newest = catalog.sets["newest"].pins()
    for case in catalog.cases:
        if case.newest == "fail":
            chosen = patching.select(list(case.patches), newest)
            needed = patching.needed(catalog, case, "newest")  # R's backport in V's list: R is upstream there
            assert chosen and [p.id for p in chosen] == needed, f"{case.id} fails on newest without a full patch"


def test_select_picks_the_variant_for_the_installed_release():
    catalog = load_catalog()
    pinned, newest = catalog.sets["pinned"].pins(), catalog.sets["newest"].pins()
    [old] = patching.select(["bitsandbytes/linear4bit-repack-rewrite"], pinned)
    [new] = patching.select(["bitsandbytes/linear4bit-repack-rewrite"], newest)
    assert old.name.endswith("@0.49.2") and "@" not in new.name
    assert patching.select(["accelerate/params4bit-hf-initialized"], newest) == []  # fixed upstream in 1.14.0
    with pytest.raises(MinreproError, match="unknown patch id"):
        patching.select(["accelerate/nope"], newest)


def _fake_env(tmp_path: Path, monkeypatch, marker: bool = True) -> tuple[Path, Path]:
    env, site = tmp_path / "env", tmp_path / "site"
    (site / "demo").mkdir(parents=True)
    (site / "demo" / "mod.py").write_text(ORIGINAL)
    env.mkdir()
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if marker:
        envs.write_marker(env, {"created_by": "minrepro", "requirements": [], "patches": []})
    monkeypatch.setattr(patching, "site_packages", lambda _env: site)
    patches_dir = tmp_path / "patches" / "demo"
    patches_dir.mkdir(parents=True)
    (patches_dir / "demo-case.diff").write_text(DIFF)
    monkeypatch.setattr(patching, "PATCHES_DIR", tmp_path / "patches")
    return env, site


@needs_gnu_patch
def test_apply_reports_hunks_is_idempotent_and_reverts(tmp_path, monkeypatch):
    env, site = _fake_env(tmp_path, monkeypatch)
    patch = patching.load_patch(tmp_path / "patches" / "demo" / "demo-case.diff")
    assert patch.files == ("demo/mod.py",)
    [report] = patching.apply_patches([patch], env)
    assert (report.file, report.hunk, report.status, report.line) == ("demo/mod.py", 1, "applied", 8)
    assert "line ten\n" in (site / "demo" / "mod.py").read_text()
    assert json.loads((env / envs.MARKER).read_text())["patches"] == ["demo/demo-case.diff"]
    [again] = patching.apply_patches([patch], env)
    assert again.status == "already applied"
    assert patching.applied_copy(env, "demo/demo-case.diff").is_file()
    assert patching.revert_patches(env) == ["demo/demo-case.diff"]
    assert (site / "demo" / "mod.py").read_text() == ORIGINAL
    assert not patching.applied_copy(env, "demo/demo-case.diff").exists()  # no record of what is not applied


@needs_gnu_patch
def test_a_diff_edited_after_it_went_in_is_reverted_by_the_text_applied(tmp_path, monkeypatch):
    # G's diff was rewritten after a local patched env had the old one: reverting with today's text failed
    # halfway and the whole-set proof then refused to apply the new diff
    env, site = _fake_env(tmp_path, monkeypatch)
    path = tmp_path / "patches" / "demo" / "demo-case.diff"
    patching.apply_patches([patching.load_patch(path)], env)
    path.write_text(DIFF.replace("+line ten", "+line TEN"))
    assert not patching.applied_as_today(env, [patching.load_patch(path)])
    assert patching.revert_patches(env) == ["demo/demo-case.diff"]
    assert (site / "demo" / "mod.py").read_text() == ORIGINAL
    patching.apply_patches([patching.load_patch(path)], env)
    assert "line TEN\n" in (site / "demo" / "mod.py").read_text()
    assert patching.applied_as_today(env, [patching.load_patch(path)])


@needs_gnu_patch
def test_a_revert_that_cannot_land_leaves_the_file_and_says_so(tmp_path, monkeypatch):
    env, site = _fake_env(tmp_path, monkeypatch)
    patching.apply_patches([patching.load_patch(tmp_path / "patches" / "demo" / "demo-case.diff")], env)
    shutil.rmtree(env / "minrepro-applied")  # an env patched before the copies were kept
    (tmp_path / "patches" / "demo" / "demo-case.diff").write_text(DIFF.replace("+line ten", "+line TEN"))
    with pytest.raises(MinreproError, match="does not revert cleanly"):
        patching.revert_patches(env)
    assert "line ten\n" in (site / "demo" / "mod.py").read_text()


@needs_gnu_patch
def test_a_hunk_that_needs_fuzz_fails_whole_and_leaves_the_file(tmp_path, monkeypatch):
    env, site = _fake_env(tmp_path, monkeypatch)
    drifted = ORIGINAL.replace("line 12\n", "line twelve\n")
    (site / "demo" / "mod.py").write_text(drifted)
    patch = patching.load_patch(tmp_path / "patches" / "demo" / "demo-case.diff")
    with pytest.raises(MinreproError, match="does not apply cleanly"):
        patching.apply_patches([patch], env)
    assert (site / "demo" / "mod.py").read_text() == drifted


@needs_gnu_patch
def test_an_offset_is_reported(tmp_path, monkeypatch):
    env, site = _fake_env(tmp_path, monkeypatch)
    (site / "demo" / "mod.py").write_text("extra\n" * 3 + ORIGINAL)
    patch = patching.load_patch(tmp_path / "patches" / "demo" / "demo-case.diff")
    [report] = patching.apply_patches([patch], env)
    assert (report.status, report.offset) == ("applied with offset", 3)


def test_refuses_an_env_minrepro_did_not_create(tmp_path, monkeypatch):
    env, site = _fake_env(tmp_path, monkeypatch, marker=False)
    patch = patching.load_patch(tmp_path / "patches" / "demo" / "demo-case.diff")
    with pytest.raises(MinreproError, match="not created by minrepro"):
        patching.apply_patches([patch], env)
    with pytest.raises(MinreproError, match="not a virtual environment"):
        patching.apply_patches([patch], tmp_path / "patches")
    assert (site / "demo" / "mod.py").read_text() == ORIGINAL


def test_refuses_the_running_environment(tmp_path, monkeypatch):
    env = Path(sys.prefix)
    if not (env / "pyvenv.cfg").is_file():
        pytest.skip("the test interpreter is not a venv")
    monkeypatch.setattr(envs, "read_marker", lambda _env: {"created_by": "minrepro"})
    with pytest.raises(MinreproError, match="environment running minrepro"):
        envs.require_tool_env(env)


def test_env_create_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "mine.txt").write_text("user data")
    with pytest.raises(MinreproError, match="not created by minrepro"):
        envs.create_env(tmp_path, ["demo==1.0"])
    assert (tmp_path / "mine.txt").read_text() == "user data"


@needs_gnu_patch
def test_a_stack_that_stops_midway_records_what_it_applied(tmp_path, monkeypatch):
    # a second patch written on top of a first that is not there fails; the env's marker must still name the
    # patches that did land, or a table recorded in that env would claim it unpatched
    env, site = _fake_env(tmp_path, monkeypatch)
    first = patching.load_patch(tmp_path / "patches" / "demo" / "demo-case.diff")
    (site / "demo" / "other.py").write_text("a\nb\nc\n")
    second_path = tmp_path / "patches" / "demo" / "other.diff"
    second_path.write_text(
        DIFF.replace("demo-case", "other").split("---\n", 1)[0] + "---\n"
        "--- a/demo/other.py\n+++ b/demo/other.py\n@@ -1,3 +1,3 @@\n a\n-x\n+y\n c\n"
    )
    second = patching.load_patch(second_path)
    with pytest.raises(MinreproError, match=r"applied before it: demo/demo-case\.diff"):
        patching.apply_patches([first, second], env)
    assert json.loads((env / envs.MARKER).read_text())["patches"] == ["demo/demo-case.diff"]
    assert "line ten\n" in (site / "demo" / "mod.py").read_text()


def _hand_made_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel written by hand (a zip with dist-info), so the test needs no build backend and no index."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "VALUE = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_a_shared_site_is_installed_once_and_linked_into_envs(tmp_path):
    # CPU torch is installed once and linked into every env: a copy per env filled the CI machine's disk
    import venv

    wheels = tmp_path / "wheels"
    _hand_made_wheel(wheels, "sharedpkg", "1.0")
    offline = ["--no-index", "--find-links", str(wheels)]
    site = envs.shared_site(Path(sys.executable), "sharedpkg==1.0", where=tmp_path / "shared", pip_args=offline)
    assert (site / "sharedpkg" / "__init__.py").is_file()
    shutil.rmtree(wheels)  # a second call must not install again (it could not: the wheel is gone)
    assert envs.shared_site(Path(sys.executable), "sharedpkg==1.0", where=tmp_path / "shared", pip_args=offline) == site
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    envs.link_site(env, site)
    out = subprocess.run(
        [str(envs.env_python(env)), "-c", "import sharedpkg; print(sharedpkg.VALUE)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "42"


def test_a_failed_shared_install_leaves_nothing_that_looks_complete(tmp_path):
    with pytest.raises(MinreproError, match="pip install --target"):
        envs.shared_site(
            Path(sys.executable),
            "nosuchpkg==1.0",
            where=tmp_path,
            pip_args=["--no-index", "--find-links", str(tmp_path)],
        )
    assert list(tmp_path.iterdir()) == []


def test_a_failed_env_install_can_be_retried(tmp_path, monkeypatch):
    # on the H100 a run without its wheelhouse failed to install, and every retry in that directory was then
    # refused as "not created by minrepro"
    monkeypatch.setattr(envs, "torch_site", lambda: str(tmp_path / "site"))
    (tmp_path / "site").mkdir()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for _ in range(2):
        with pytest.raises(MinreproError, match="nosuchpkg") as failed:
            envs.create_env(tmp_path / "env", ["nosuchpkg==1.0"], wheelhouse=wheels)
        assert "not created by minrepro" not in str(failed.value)


@pytest.mark.parametrize(
    "returncode, stderr, said",
    [
        (
            1,
            "ERROR: No matching distribution found for peft==9\nWARNING: Location 'file:///x' is ignored\n",
            "ERROR: No matching distribution found for peft==9",
        ),
        (-15, "WARNING: Location 'file:///x' is ignored\n", "pip was killed by signal 15"),
        (
            2,
            "Traceback (most recent call last):\nOSError: [Errno 28] No space left on device\nWARNING: Location x\n",
            "OSError: [Errno 28] No space left on device",
        ),
    ],
)
def test_a_failed_pip_says_why_not_its_last_warning(returncode, stderr, said):
    # CI's newest-patched env failed with "... failed under ...: WARNING: Location ... is ignored": pip had been killed
    import subprocess

    from minrepro.envs.venvs import _pip_failure

    assert _pip_failure(subprocess.CompletedProcess([], returncode, "", stderr)) == said


def test_a_replaced_library_file_keeps_no_stale_bytecode_in_the_bytecode_cache(tmp_path, bytecode_kept):
    """Where the environment turns bytecode off, runs keep it under the cache: a file patched (or laid over from a
    commit) with the same size in the same second would be imported from the old bytecode unless dropped there too."""
    from minrepro.harness.runner import run_script

    site = tmp_path / "site"
    (site / "demo").mkdir(parents=True)
    module = site / "demo" / "mod.py"
    script = tmp_path / "reads.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\nfrom demo import mod\nraise SystemExit(mod.X)\n")

    def replaced(text: str) -> int:
        module.write_text(text)
        os.utime(module, (1_700_000_000, 1_700_000_000))  # the same second, as a quick patch or a commit's time
        return run_script(script, timeout=60).returncode

    (site / "demo" / "__init__.py").write_text("")
    assert replaced("X = 3\n") == 3
    assert replaced("X = 4\n") == 3  # the hazard: same size, same second
    patching._drop_bytecode(site, ("demo/mod.py",))
    assert run_script(script, timeout=60).returncode == 4
