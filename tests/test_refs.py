"""Libraries at git refs (`minrepro.envs.refs`) and commit bisection, on small git repositories made here."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from minrepro.envs.refs import RepoRef, commits_between, overlay, parse_repo, pr_number
from minrepro.errors import MinreproError
from minrepro.reports.bisect import bisect_commits


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _library_repo(tmp_path: Path, library: str, package: str, subjects: list[str], flips_at: int) -> Path:
    """A repository whose package says BUG = True before commit `flips_at` (an index into `subjects`)."""
    repo = tmp_path / f"{library}-repo"
    (repo / package).mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for i, subject in enumerate(subjects):
        (repo / package / "__init__.py").write_text(f'__version__ = "1.{i}.0.dev0"\nBUG = {i < flips_at}\n')
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", subject)
        if i == 0:
            _git(repo, "tag", "v1.0.0")
    _git(repo, "tag", "v1.1.0")
    return repo


SUBJECTS = [
    "Release: v1.0.0",
    "Speed up docs (#10)",
    "Fix the offload hook (#11)",
    "Typo (#12)",
    "Merge pull request #13 from x/y",
]


def test_pr_numbers_come_from_squash_and_merge_subjects():
    assert [pr_number(s) for s in SUBJECTS] == [None, 10, 11, 12, 13]
    assert pr_number("Fix #3 in the docs") is None  # a mention is not the PR the commit came from


def test_a_repo_spec_is_checked_at_once(tmp_path):
    repo = _library_repo(tmp_path, "peft", "src/peft", SUBJECTS, 2)
    assert parse_repo(f"peft={repo}").commit() == parse_repo(f"peft={repo}@main").commit()
    for spec, why in (
        (f"torch={repo}", "LIB one of"),
        (f"peft={tmp_path}", "not a git repository"),
        (f"peft={repo}@nope", "nope"),
    ):
        with pytest.raises(MinreproError, match=why):
            parse_repo(spec)


def test_an_overlay_replaces_the_package_and_keeps_the_wheels_native_library(tmp_path):
    repo = _library_repo(tmp_path, "bitsandbytes", "bitsandbytes", SUBJECTS, 2)
    site = tmp_path / "site"
    (site / "bitsandbytes").mkdir(parents=True)
    (site / "bitsandbytes" / "stale.py").write_text("gone = True\n")
    (site / "bitsandbytes" / "libbitsandbytes_cpu.so").write_bytes(b"\x7fELF")
    ref = RepoRef("bitsandbytes", repo)
    record = overlay(site, ref, ref.commit("v1.0.0"))
    assert "BUG = True" in (site / "bitsandbytes" / "__init__.py").read_text()
    assert not (site / "bitsandbytes" / "stale.py").exists()
    assert (site / "bitsandbytes" / "libbitsandbytes_cpu.so").read_bytes() == b"\x7fELF"
    assert record["version"] == "1.0.0.dev0" and "native library from the wheel" in record["how"]


@dataclass(frozen=True)
class _Case:
    id: str = "toy"


@dataclass
class _Judge:
    """Stands in for CommitJudge: reads BUG at each commit (bad while it is True), or skips the given ones."""

    repo: RepoRef
    skip: frozenset[str] = frozenset()
    case: _Case = _Case()

    def __call__(self, commit: str) -> str:
        if self.repo.subject(commit) in self.skip:
            return "skip"
        return "bad" if "BUG = True" in self.repo.git("show", f"{commit}:src/peft/__init__.py") else "good"


def test_commit_bisection_names_the_fixing_commit_and_its_pr(tmp_path):
    repo = RepoRef("peft", _library_repo(tmp_path, "peft", "src/peft", SUBJECTS, 2))
    assert len(commits_between(repo, "v1.0.0", "v1.1.0")) == len(SUBJECTS)
    found = bisect_commits(_Judge(repo), "v1.0.0", "v1.1.0")
    assert (found.direction, found.subject, found.pr) == ("fixed", SUBJECTS[2], 11)
    assert found.last_before == repo.commit("v1.1.0~3") and not found.undecided


def test_a_skipped_commit_before_the_flip_is_named_as_undecided(tmp_path):
    repo = RepoRef("peft", _library_repo(tmp_path, "peft", "src/peft", SUBJECTS, 3))
    found = bisect_commits(_Judge(repo, frozenset({SUBJECTS[2]})), "v1.0.0", "v1.1.0")
    assert found.pr == 12 and found.undecided == [repo.commit("v1.1.0~2")]
    assert "could not be judged" in found.sentence()


def test_a_break_is_found_the_same_way_and_equal_ends_are_refused(tmp_path):
    repo = RepoRef("peft", _library_repo(tmp_path, "peft", "src/peft", SUBJECTS, 2))

    class Inverted(_Judge):
        def __call__(self, commit: str) -> str:
            return {"bad": "good", "good": "bad"}[super().__call__(commit)]

    assert bisect_commits(Inverted(repo), "v1.0.0", "v1.1.0").direction == "broke"
    with pytest.raises(MinreproError, match="needs a failing and a passing end"):
        bisect_commits(_Judge(repo), "v1.1.0~1", "v1.1.0")


def test_a_root_level_package_checkout_gets_the_wheels_native_library(tmp_path):
    # bitsandbytes' tests import the checkout's package (it sits at the repository root), which has no native
    # library: the AVX512-BF16 check then answers False and J's kit test passed on main for that reason alone
    from minrepro.envs.refs import native_into_checkout

    site, checkout = tmp_path / "site", tmp_path / "checkout"
    (site / "bitsandbytes").mkdir(parents=True)
    (site / "bitsandbytes" / "libbitsandbytes_cpu.so").write_bytes(b"\x7fELF")
    (site / "bitsandbytes" / "__init__.py").write_text("")
    (checkout / "bitsandbytes").mkdir(parents=True)
    copied = native_into_checkout(site, "bitsandbytes", checkout)
    assert copied == [checkout / "bitsandbytes" / "libbitsandbytes_cpu.so"]
    assert not (checkout / "bitsandbytes" / "__init__.py").exists()  # only native files
    assert native_into_checkout(site, "bitsandbytes", checkout) == []  # nothing twice


def test_commits_of_one_second_laid_over_in_turn_keep_no_stale_bytecode(tmp_path, bytecode_kept):
    """A rebase-merged series shares its commit time, which an overlay's files take as their mtime: where runs keep
    their bytecode under the cache (the environment turns it off), a same-size change would run the old code."""
    from minrepro.harness.runner import run_script

    repo = tmp_path / "peft-repo"
    (repo / "src" / "peft").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    same_second = {"GIT_COMMITTER_DATE": "2026-01-02T03:04:05", "GIT_AUTHOR_DATE": "2026-01-02T03:04:05"}
    for value in (3, 4):
        (repo / "src" / "peft" / "__init__.py").write_text(f"X = {value}\n")
        _git(repo, "add", "-A")
        subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"X={value}"],
            check=True,
            env={"PATH": "/usr/bin:/bin", **same_second},
        )
    ref, site = RepoRef("peft", repo), tmp_path / "site"
    script = tmp_path / "reads.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\nimport peft\nraise SystemExit(peft.X)\n")
    first, second = ref.git("rev-list", "--reverse", "main").split()
    overlay(site, ref, first)
    assert run_script(script, timeout=60).returncode == 3
    assert list(bytecode_kept.rglob("__init__.*.pyc"))  # the run kept its bytecode there, not beside the source
    overlay(site, ref, second)
    assert run_script(script, timeout=60).returncode == 4
