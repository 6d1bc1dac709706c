"""Libraries at git refs (a fetched repository's `main`, any commit): what a maintainer asks first ("does it still
fail on main?", "which commit fixed it?").

A ref is laid over a tool-made env of a version set: the library's Python package, exported from the repository at
the commit, replaces the installed release's package directory. Nothing is built, so a step of a bisection costs
seconds, and bitsandbytes works too: its native library cannot be built here, so the wheel's compiled files are
kept under the ref's Python code (each record says so). The distribution's metadata stays the release's: a ref that
needs a newer dependency than the set has fails to import, which a bisection steps over as a skip.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..dirs import bytecode_mirrors
from ..errors import MinreproError
from .venvs import read_marker, site_packages, write_marker

PACKAGE_DIRS = {
    "accelerate": "src/accelerate",
    "peft": "src/peft",
    "transformers": "src/transformers",
    "bitsandbytes": "bitsandbytes",
}
NATIVE = ("*.so", "*.dll", "*.dylib")  # kept from the wheel: the ref's C++/CUDA sources are not built here
PR_NUMBER = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)")


@dataclass(frozen=True)
class RepoRef:
    library: str
    gitdir: Path
    ref: str = "HEAD"

    def git(self, *args: str) -> str:
        git_dir = self.gitdir if (self.gitdir / "HEAD").is_file() else self.gitdir / ".git"
        proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise MinreproError(f"git {' '.join(args[:2])} in {self.gitdir}: {proc.stderr.strip()[-200:]}")
        return proc.stdout

    def commit(self, ref: str | None = None) -> str:
        try:
            return self.git("rev-parse", "--verify", f"{ref or self.ref}^{{commit}}").strip()
        except MinreproError:
            raise MinreproError(f"no commit {ref or self.ref!r} in {self.gitdir} ({self.library})") from None

    def subject(self, commit: str) -> str:
        return self.git("log", "-1", "--format=%s", commit).strip()

    def describe(self, commit: str) -> dict:
        """What a record says of a commit: its subject and PR, its date and the version its code calls itself (a
        fetched snapshot's main can predate the newest release: the page must say so)."""
        subject = self.subject(commit)
        init = self.git("show", f"{commit}:{PACKAGE_DIRS[self.library]}/__init__.py")
        version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", init, re.M)
        return {
            "library": self.library,
            "commit": commit,
            "subject": subject,
            "pr": pr_number(subject),
            "date": self.git("log", "-1", "--format=%cs", commit).strip(),
            "version": version[1] if version else None,
            "how": "Python package over the release's wheel"
            + (" (native library from the wheel)" if self.library == "bitsandbytes" else ""),
        }


def parse_repo(spec: str) -> RepoRef:
    """`LIB=GITDIR[@REF]` (REF defaults to the repository's HEAD, a fetched mirror's main), or a one-line error."""
    library, sep, where = spec.partition("=")
    if not sep or library not in PACKAGE_DIRS:
        raise MinreproError(f"--repo takes LIB=GITDIR[@REF] with LIB one of {', '.join(PACKAGE_DIRS)}: got {spec!r}")
    path, _, ref = where.rpartition("@") if "@" in where else (where, "", "")
    gitdir = Path(path).expanduser().absolute()
    if not (gitdir / "HEAD").is_file() and not (gitdir / ".git").exists():
        raise MinreproError(f"{gitdir} is not a git repository (--repo {library}=...)")
    repo = RepoRef(library, gitdir, ref or "HEAD")
    repo.commit()  # an unknown ref is a one-line error now, not a failed step later
    return repo


def pr_number(subject: str) -> int | None:
    """The PR a commit on main came from, by the subject GitHub writes: squash `Title (#123)`, or a merge commit."""
    match = PR_NUMBER.search(subject)
    return int(match[1] or match[2]) if match else None


def commits_between(repo: RepoRef, older: str, newer: str) -> list[str]:
    """`older` and the commits after it up to `newer`, oldest first, along newer's first parents (one per merged
    PR on a squash-merging main). Release tags sit on release branches: the range is what newer has and older
    lacks, as `git bisect` takes it."""
    start = repo.commit(older)
    after = repo.git("rev-list", "--first-parent", "--reverse", f"{start}..{repo.commit(newer)}").split()
    return [start, *after]


def overlay(site: Path, repo: RepoRef, commit: str) -> dict:
    """Replace `site/<library>` with the repository's package at `commit` (the wheel's native files kept)."""
    package = PACKAGE_DIRS[repo.library]
    archive = subprocess.run(
        [
            "git",
            "--git-dir",
            str(repo.gitdir if (repo.gitdir / "HEAD").is_file() else repo.gitdir / ".git"),
            "archive",
            "--format=tar",
            commit,
            package,
        ],
        capture_output=True,
    )
    if archive.returncode != 0:
        raise MinreproError(
            f"{repo.library} has no {package}/ at {commit[:12]}: {archive.stderr.decode().strip()[-160:]}"
        )
    target = site / repo.library
    with tempfile.TemporaryDirectory(prefix="minrepro-ref-") as scratch:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(scratch, filter="data")
        fresh = Path(scratch) / package
        if target.is_dir():
            for pattern in NATIVE:
                for native in target.rglob(pattern):
                    dest = fresh / native.relative_to(target)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(native, dest)
            shutil.rmtree(target)
        for mirror in bytecode_mirrors(target):  # a file of the same size and commit time keeps no stale bytecode
            shutil.rmtree(mirror, ignore_errors=True)
        shutil.copytree(fresh, target)
    return repo.describe(commit)


def native_into_checkout(site: Path, library: str, checkout: Path) -> list[Path]:
    """Copy the wheel's native files into a checkout whose package sits at its root (bitsandbytes): tests run from
    there import the checkout's package first, which without them has no native library and silently takes the
    no-library path (the AVX512-BF16 check answers False). Untracked files: no commit picks them up."""
    source, dest = site / library, checkout / PACKAGE_DIRS[library]
    copied = []
    for pattern in NATIVE if dest.is_dir() else ():
        for native in source.rglob(pattern):
            target = dest / native.relative_to(source)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(native, target)
                copied.append(target)
    return copied


def overlay_env(env: Path, repos: list[RepoRef], commits: dict[str, str] | None = None) -> list[dict]:
    """Lay each repo's ref (or `commits[library]`) over a tool-made env; the env's marker records what it holds."""
    marker = read_marker(env)
    if not marker or marker.get("created_by") != "minrepro":
        raise MinreproError(f"{env} is not an environment minrepro created: refs go only into those")
    records = [overlay(site_packages(env), repo, (commits or {}).get(repo.library) or repo.commit()) for repo in repos]
    marker["refs"] = records
    write_marker(env, marker)
    return records


def ref_env(catalog, set_name: str, repos: list[RepoRef]) -> Path:
    """The python of a tool-made env of the set with each repo's ref laid over it (cached by the commits)."""
    import hashlib

    from ..dirs import cache
    from .venvs import create_env, env_python, wheelhouse_from_env

    commits = [f"{repo.library}@{repo.commit()}" for repo in repos]
    env = cache("envs", "refs", f"{set_name}-" + hashlib.sha1(" ".join(commits).encode()).hexdigest()[:12])
    if [f"{r['library']}@{r['commit']}" for r in (read_marker(env) or {}).get("refs", [])] != commits:
        create_env(
            env,
            [str(r) for r in catalog.version_set(set_name).requirements],
            wheelhouse_from_env(),
            label=f"{set_name} + {', '.join(commits)}",
        )
        overlay_env(env, repos)
    return env_python(env)


def refs_page(document: dict) -> str:
    """Markdown: each case's outcome on the set's releases (declared, checked by `nox -s minrepro`) and with the
    libraries at the refs (observed in this run), with the commits."""
    lines = [
        "# The catalog on the libraries' main",
        "",
        f"Generated by `minrepro run --set {document['set']} --repo LIB=GITDIR ... --doc` on "
        f"{document['date']} ({document['machine']}, {'CUDA' if document.get('gpu') else 'no CUDA'}). "
        f"Each library below is its repository's code at the commit, laid over the {document['set']} set's "
        "release (metadata and dependencies stay the release's).",
        "",
    ]
    lines += [
        f"- {r['library']}: `{r['commit'][:12]}` of {r.get('date')}, version {r.get('version')}: {r['subject']} "
        f"({r['how']}); the set has {document['versions'].get(r['library'])}{_older(r, document)}"
        for r in document["refs"]
    ]
    lines += [
        "",
        f"| case | family | {document['set']} (declared) | on main | signature on main |",
        "|---|---|---|---|---|",
    ]
    for row in document["cases"]:
        detail = row["reason"] if row["observed"] in ("skipped", "fail-other") else row["headline"]
        still = {"fail": "still fails", "pass": "passes"}.get(row["observed"], row["observed"])
        lines.append(
            f"| {row['case']} | {row['family']} | {row['expected'] or '-'} | {still} | "
            f"{detail[:90].replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def _older(record: dict, document: dict) -> str:
    """A fetched snapshot's main can be older than the newest release: then a fix made since would not show."""
    from packaging.version import InvalidVersion, Version

    try:
        older = Version(record.get("version") or "") < Version(document["versions"][record["library"]])
    except (InvalidVersion, KeyError, TypeError):
        return ""
    return " (this main predates that release: a fix merged since would not show here)" if older else ""
