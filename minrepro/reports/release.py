"""A library's release as a git repository, for a PR kit where the library's own repository cannot be fetched.

`minrepro kit CASE --release transformers==5.24.0`: the release's source distribution (or, where the index has none,
its wheel, the package laid out as the repository has it) is downloaded into the cache, unpacked, and committed once,
as "<library> <version> (released source)". A source distribution carries few of the repository's tests: a test file
it lacks comes from `--release-tests DIR` (files in the repository's layout, as they stand at the release's tag), and
the kit records which files came from there and their sha256. Nothing is written outside the cache.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..envs.refs import PACKAGE_DIRS, RepoRef
from ..errors import MinreproError

RELEASE_SPEC = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([0-9][A-Za-z0-9_.+!-]*)\s*$")
# pip's words for an index it could not reach (a 404 is a project or file the index lacks, not an index out of reach)
_UNREACHABLE = re.compile(
    r"Could not fetch URL|NewConnectionError|Failed to establish a new connection|Name or service not known|"
    r"Temporary failure in name resolution|Network is unreachable|ConnectTimeout|ReadTimeout"
)


@dataclass(frozen=True)
class Release:
    library: str
    version: str

    @property
    def spec(self) -> str:
        return f"{self.library}=={self.version}"

    @property
    def label(self) -> str:
        return f"{self.library} {self.version}"


def parse_release(spec: str) -> Release:
    """`LIB==VERSION` with LIB a library the kits know, or a one-line error."""
    match = RELEASE_SPEC.match(spec)
    if not match or match[1].lower() not in PACKAGE_DIRS:
        raise MinreproError(f"--release takes LIB==VERSION with LIB one of {', '.join(PACKAGE_DIRS)}: got {spec!r}")
    return Release(match[1].lower(), match[2])


def _archive_in(folder: Path, release: Release) -> Path | None:
    """The release's sdist in `folder` if there is one, else its wheel (a distribution's name may use `_` or `-`)."""
    stem = re.sub(r"[-_.]+", "[-_.]", release.library)
    found = sorted(p for p in folder.glob("*") if re.match(rf"(?i){stem}-{re.escape(release.version)}[-.]", p.name))
    sdists = [p for p in found if p.name.endswith((".tar.gz", ".zip"))]
    wheels = [p for p in found if p.name.endswith(".whl")]
    return (sdists or wheels or [None])[0]


def download(release: Release, folder: Path, wheelhouse: Path | None = None) -> Path:
    """The release's source distribution (else its wheel) in `folder`, downloaded once with pip's own index
    configuration (or from `wheelhouse` only), or a one-line error saying whether the index was out of reach or
    has no such release."""
    folder.mkdir(parents=True, exist_ok=True)
    if found := _archive_in(folder, release):
        return found
    # from a wheelhouse, its file as it is: `pip download` of an sdist builds its metadata, which offline fails (no
    # build backend to install), and pip then takes the wheel, which lacks the repository's layout and ruff config
    if wheelhouse and (given := _archive_in(Path(wheelhouse), release)):
        shutil.copy2(given, folder / given.name)
        return folder / given.name
    index = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), *index, release.spec]
    failures = []
    # the sdist carries the repository's layout (src/, pyproject's ruff config, some tests); the wheel only the package
    for kind in (["--no-binary", ":all:"], ["--only-binary", ":all:"]):
        proc = subprocess.run([*base[:5], *kind, *base[5:]], capture_output=True, text=True)
        if proc.returncode == 0 and (found := _archive_in(folder, release)):
            return found
        failures.append(proc.stdout + proc.stderr)
    text = "\n".join(failures)
    if _UNREACHABLE.search(text):
        raise MinreproError(
            f"cannot download {release.spec}: the package index is out of reach (offline?); run where it answers, "
            f"or put its sdist or wheel in {folder}"
        )
    raise MinreproError(f"the package index has no sdist or wheel of {release.spec}")


def _unpack(archive: Path, release: Release, tree: Path) -> list[str]:
    """The archive's files into `tree` in the repository's layout; the files it holds (relative paths)."""
    package = PACKAGE_DIRS[release.library]
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            names = [n for n in wheel.namelist() if n.startswith(release.library + "/") and not n.endswith("/")]
            for name in names:
                # the wheel holds the package at its root; the repository under PACKAGE_DIRS (src/transformers)
                target = tree / package / name.split("/", 1)[1]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(name))
        return [f"{package}/{n.split('/', 1)[1]}" for n in names]
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and "/" in m.name]
        for member in members:
            member.name = member.name.split("/", 1)[1]  # the sdist's top folder (transformers-5.24.0/)
        tar.extractall(tree, members=members, filter="data")
    return [m.name for m in members]


def _release_date(archive: Path) -> str:
    """The newest file time in the archive, as the release commit's date: the same archive gives the same commit."""
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            stamp = max(info.date_time for info in wheel.infolist())
        return "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}+00:00".format(*stamp)
    with tarfile.open(archive) as tar:
        return f"@{max(int(m.mtime) for m in tar.getmembers())} +0000"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def relative_imports(source: str, path: str) -> list[str]:
    """The files a test file's relative imports need (`from ..test_modeling_common import X` in tests/utils/x.py ->
    tests/test_modeling_common.py), without the packages' `__init__.py`: pytest's rootdir import finds them as
    namespace packages."""
    parts = path.split("/")[:-1]
    needed = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = parts[: len(parts) - node.level + 1]
            module = [*base, *(node.module.split(".") if node.module else [])]
            names = [a.name for a in node.names] if not node.module else [None]
            for name in names:  # `from . import x`: x is a module beside the file
                needed.append("/".join(module + ([name] if name else [])))
    return sorted({m + ".py" for m in needed})


def _missing(tree: Path, test_files: list[str]) -> list[str]:
    """Of the test files and the files their relative imports name (followed through), those the tree lacks."""
    missing, seen, todo = [], set(), list(test_files)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        file = tree / path
        if not file.is_file():
            if not (tree / path.removesuffix(".py") / "__init__.py").is_file():
                missing.append(path)
            continue
        todo += relative_imports(file.read_text(encoding="utf-8"), path)
    return sorted(missing)


def release_repo(
    release: Release, test_files: list[str], tests_dir: Path | None, root: Path, wheelhouse: Path | None = None
) -> tuple[RepoRef, dict]:
    """A git repository of the release's source in `root` (one commit), with the Python files of `tests_dir` it
    lacks; `test_files` and what they import relatively must then be there. Rebuilt only when the archive or those
    files change. The repository and the record a kit keeps."""
    archive = download(release, root / "archive", wheelhouse)
    tree = root / "repo"
    staged = root / "staging"
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    shipped = set(_unpack(archive, release, staged))
    outside: dict[str, str] = {}
    # every file given that the archive lacks, not only this kit's: kits sharing the folder share one release commit
    for given in sorted(Path(tests_dir).rglob("*.py")) if tests_dir else ():
        path = given.relative_to(tests_dir).as_posix()
        if path not in shipped:
            (staged / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(given, staged / path)
            outside[path] = _sha256(given)
    missing = _missing(staged, test_files)
    if missing:
        what = "sdist" if archive.name.endswith((".tar.gz", ".zip")) else "wheel"
        where = f"{tests_dir} lacks it too" if tests_dir else "give the file as it stands at the release's tag"
        raise MinreproError(
            f"{release.label}'s released source ({what} {archive.name}) has no {', '.join(missing)}: "
            f"{where} (--release-tests DIR, the repository's layout)"
        )
    record = {
        "release": release.spec,
        "archive": archive.name,
        "sha256": _sha256(archive),
        "tests_from_outside": outside,  # path -> sha256: files the archive lacks, taken from --release-tests
        "tests_in_archive": sum(p.startswith("tests/") for p in shipped),  # an sdist carries few of the repository's
    }
    marker = root / "release.json"
    key = {k: record[k] for k in ("release", "sha256", "tests_from_outside")}
    if marker.is_file() and tree.is_dir() and json.loads(marker.read_text(encoding="utf-8")).get("key") == key:
        shutil.rmtree(staged)
        return RepoRef(release.library, tree), record
    if tree.exists():
        shutil.rmtree(tree)
    staged.rename(tree)
    _commit_release(tree, release, archive, record)
    marker.write_text(json.dumps({"key": key, "record": record}, indent=2) + "\n", encoding="utf-8")
    return RepoRef(release.library, tree), record


def _commit_release(tree: Path, release: Release, archive: Path, record: dict) -> None:
    date = _release_date(archive)
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git = ["git", "-C", str(tree), "-c", "user.name=minrepro", "-c", "user.email=minrepro@localhost"]
    body = f"The release's {archive.name} (sha256 {record['sha256']})."
    if record["tests_from_outside"]:
        body += " Not in it, taken from --release-tests:\n\n" + "\n".join(
            f"- {path} (sha256 {digest})" for path, digest in sorted(record["tests_from_outside"].items())
        )
    for args in (
        ["init", "-q", "-b", "release"],
        ["add", "-A", "-f"],
        ["commit", "-q", "-m", f"{release.label} (released source)\n\n{body}"],
    ):
        proc = subprocess.run([*git, *args], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise MinreproError(f"git {args[0]} in {tree}: {proc.stderr.strip()[-300:]}")
