"""A PR kit: a catalog family's fix brought to the library's `main`, the way its maintainers take a contribution.

From a fetched repository (`--repo LIB=GITDIR[@REF]`), a shared clone gets a branch with two commits: the
regression test (`patches/<lib>/<name>.test`: the test file and class it goes into, then the method, written in
the file's own style), then the fix (the family's diff, ported: applied to main with `patch`, offsets reported).
The proof runs in a tool-made env of the newest set with the library's package laid over from the branch
(`minrepro.envs.refs`): the new test fails at the test commit and passes at the fix commit; the touched test
file's other tests show no new failure; the repository's own ruff config passes on the files the branch changes.
Written under `results/kits/<case>/`: the patch series (`git format-patch`), the PR description, the proof.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable

from ..catalog.manifest import Case, Catalog
from ..catalog.run import observe
from ..dirs import scrubbed, without_local_paths
from ..envs.patching import PATCHES_DIR
from ..envs.refs import RepoRef, native_into_checkout, overlay_env
from ..envs.upstream import TEST_REQUIREMENTS, PytestConditions, TestRun, new_failures, run_tests
from ..envs.venvs import create_env, env_python, pip_install, read_marker, site_packages, wheelhouse_from_env
from ..errors import MinreproError
from ..harness.probe import probe
from ..harness.runner import run_script

TEST_HEADER = re.compile(r"^# (Test-file|Test-class|Test-import): (.+)$")
TEST_IMPORT = re.compile(r"^from ([\w.]+) import (\w+)$")
LINE_LENGTH = 119  # the libraries' `ruff format` line length (transformers 119, accelerate and peft 119 too)


@dataclass(frozen=True)
class RegressionTest:
    test_file: str  # in the repository: tests/test_modeling_utils.py
    test_class: str | None  # the TestCase the method joins (None: a module-level test function)
    body: str  # the method or function, indented as it will stand
    # names the test needs beside the file's own imports (`from transformers.testing_utils import require_x`): a
    # decorator is evaluated when the class is, so the name cannot be imported inside the method
    imports: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        match = re.search(r"def (test_\w+)", self.body)
        if not match:
            raise MinreproError("a regression test defines no test_ function")
        return match[1]

    @property
    def node_id(self) -> str:
        return "::".join(p for p in (self.test_file, self.test_class, self.name) if p)


def read_test(path: Path) -> RegressionTest:
    """`patches/<lib>/<name>.test`: `# Test-file:` and `# Test-class:` lines, any `# Test-import: from M import N`
    lines, then the code."""
    fields, imports, lines = {}, [], path.read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and (match := TEST_HEADER.match(lines[0].rstrip())):
        if match[1] == "Test-import":
            if not TEST_IMPORT.match(match[2].strip()):
                raise MinreproError(f"{path}: write '# Test-import: from MODULE import NAME', one name a line")
            imports.append(match[2].strip())
        else:
            fields[match[1]] = match[2].strip()
        lines.pop(0)
    if "Test-file" not in fields:
        raise MinreproError(f"{path}: no '# Test-file: tests/...' line at the top")
    return RegressionTest(fields["Test-file"], fields.get("Test-class"), "".join(lines).rstrip() + "\n", tuple(imports))


def _isort_key(name: str) -> tuple[int, str]:
    """isort's order inside one `from M import ...` (order-by-type): CONSTANTS, Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def add_import(source: str, statement: str) -> str:
    """`from M import N` merged into the file's own top-level import from M, sorted and formatted as ruff does."""
    module, name = TEST_IMPORT.match(statement).groups()
    found = [
        n
        for n in ast.parse(source).body
        if isinstance(n, ast.ImportFrom) and n.module == module and not n.level and all(not a.asname for a in n.names)
    ]
    if not found:
        raise MinreproError(f"the test file has no 'from {module} import ...' to add {name} to")
    node, lines = found[0], source.splitlines(keepends=True)
    names = sorted({a.name for a in node.names} | {name}, key=_isort_key)
    one = f"from {module} import {', '.join(names)}\n"
    text = (
        one
        if len(one) <= LINE_LENGTH + 1
        else f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")\n"
    )
    return "".join(lines[: node.lineno - 1]) + text + "".join(lines[node.end_lineno :])


def insert_test(source: str, test: RegressionTest) -> str:
    """The test file with the test added at the end of its class (or of the module), its imports merged in."""
    for statement in test.imports:
        source = add_import(source, statement)
    lines = source.splitlines(keepends=True)
    if test.test_class is None:
        return source.rstrip() + "\n\n\n" + test.body
    classes = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == test.test_class]
    if not classes:
        raise MinreproError(f"{test.test_file} has no class {test.test_class}")
    end = classes[0].end_lineno
    return "".join(lines[:end]) + "\n" + test.body + "".join(lines[end:])


@dataclass
class KitProof:
    case: str
    library: str
    base: dict  # the main commit the branch starts from (refs record)
    branch: str
    title: str  # the fix commit's subject: the PR's title
    commits: list[str] = field(default_factory=list)
    port: str = ""  # how the fix went onto main (patch's own words: offsets, fuzz)
    test: str = ""
    case_before: str = ""  # the catalog case's own run at the test commit (main's code): its failure
    case_after: str = ""  # and at the fix commit ("passes")
    case_after_outcome: str = ""  # pass, or fail-other where another library's part of the fix is still missing
    # what the case printed with the fix: the cases print the branch they reached (the offload hooks, the devices), so
    # a pass says it exercised the bug's path rather than skipped it
    case_after_printed: list[str] = field(default_factory=list)
    test_before: str = ""  # failed | passed | skipped, at the test commit
    test_after: str = ""  # at the fix commit
    test_reasons: dict = field(default_factory=dict)  # before/after -> why the new test failed there (JUnit's message)
    file_new_failures: list[str] = field(default_factory=list)  # the touched test file, fix commit vs main
    file_counts: dict = field(default_factory=dict)
    lint: dict = field(default_factory=dict)  # command -> "ok" or what the branch adds
    lint_tool: str = ""  # the ruff that judged it (the repository's pin)
    # extra pytest options every run got (`--pytest-args`), e.g. a warning filter for a stale main beside a newer
    # release of another library; recorded because they are part of what was proved
    pytest_args: list[str] = field(default_factory=list)
    machine: str = ""  # where the tests ran: a GPU test proved on a CPU box is only a skip
    # made against a release's source, not main (`--release`): the archive, its sha256, the test files it lacked
    release: dict = field(default_factory=dict)
    # what the run could not show: a new test that only skipped here (it needs a GPU this machine lacks)
    not_shown: str = ""

    @property
    def against(self) -> str:
        """What the branch starts from, as the description names it."""
        if self.release:
            name, _, version = self.release["release"].partition("==")
            return f"{name} {version}'s released source, not `main`"
        return "`main`"

    @property
    def file_measured(self) -> bool:
        """Whether the file's other tests ran on main: a `-k` that left none there makes "no new failure" empty."""
        # kits recorded before the file ran once on main keep their counts under "before"
        return any((self.file_counts.get("main") or self.file_counts.get("before") or {}).values())

    @property
    def green(self) -> bool:
        return (
            self.test_before == "failed"
            and self.test_after == "passed"
            and not self.file_new_failures
            and self.file_measured
            and self.case_after_outcome in ("pass", "fail-other")
            and all(v == "ok" for v in self.lint.values())
        )


def _git(work: Path, *args: str, date: str | None = None) -> str:
    # `date`: the base commit's, for the kit's own commits, so that a rerun writes the same series byte for byte
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else None
    proc = subprocess.run(
        ["git", "-C", str(work), "-c", "user.name=minrepro", "-c", "user.email=minrepro@localhost", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise MinreproError(f"git {args[0]} in {work}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def patch_for(case: Case, library: str) -> tuple[list[Path], Path]:
    """The family's diffs for `library` (newest variants, in stacking order) and the regression test beside the
    last: a fix that needs an earlier family's (F on G) goes in as a series, one commit per diff."""
    root = PATCHES_DIR / library
    # a diff with only ports to old releases (`name@0.19.1.diff`: R's in V's list) is a fix that main already has
    names = [
        p.split("/", 1)[1]
        for p in case.patches
        if p.startswith(library + "/") and (root / f"{p.split('/', 1)[1]}.diff").is_file()
    ]
    if not names:
        raise MinreproError(f"{case.id} has no {library} patch (its patches: {', '.join(case.patches) or 'none'})")
    test = root / f"{names[-1]}.test"
    if not test.is_file():
        raise MinreproError(
            f"no regression test for {case.id}: write {test.relative_to(root.parent.parent)} "
            "(# Test-file:, # Test-class:, then the test in the library's style)"
        )
    return [root / f"{name}.diff" for name in names], test


def build_branch(case: Case, repo: RepoRef, work: Path, against: str = "main") -> KitProof:
    """A shared clone of the repository at the ref, with the test commit and one fix commit per diff of the case's
    patches to its library (`patch_for`) on a branch (`against`: what the test commit says it fails on, main or a
    release)."""
    diffs, test_path = patch_for(case, repo.library)
    test = read_test(test_path)
    if work.exists():
        shutil.rmtree(work)
    cloned = subprocess.run(
        ["git", "clone", "-q", "--shared", "--no-checkout", str(repo.gitdir), str(work)], capture_output=True, text=True
    )
    if cloned.returncode != 0:  # a partial or damaged copy of the repository (objects missing)
        raise MinreproError(f"cannot clone {repo.gitdir}: {(cloned.stderr.strip().splitlines() or ['no output'])[-1]}")
    base = repo.commit()
    branch = f"minrepro/{case.id}"
    _git(work, "checkout", "-q", "-b", branch, base)
    target = work / test.test_file
    target.write_text(insert_test(target.read_text(encoding="utf-8"), test), encoding="utf-8")
    date = _git(work, "log", "-1", "--format=%cI", base).strip()
    _git(
        work,
        "commit",
        "-q",
        "-am",
        f"Add a regression test: {test.name}\n\nIt fails on {against}: {case.id} "
        f"({', '.join(case.upstream) or 'no upstream thread yet'}).",
        date=date,
    )
    ports, subject = [], ""
    for diff in diffs:
        subject, port = _commit_diff(diff, repo.library, base, work, date)
        ports.append(port if len(diffs) == 1 else f"{diff.stem}: {port}")
    commits = _git(work, "rev-list", "--reverse", f"{base}..HEAD").split()
    return KitProof(
        case.id, repo.library, repo.describe(base), branch, subject, commits, "; ".join(ports), test.node_id
    )


def _commit_diff(diff: Path, library: str, base: str, work: Path, date: str) -> tuple[str, str]:
    """Apply one patch file to the work tree and commit it with its own subject and description."""
    text = diff.read_text(encoding="utf-8")
    body = text[text.index("\n---\n") + 5 :]
    applied = subprocess.run(
        ["patch", "-p1", "--no-backup-if-mismatch", "-d", str(work)], input=body, capture_output=True, text=True
    )
    if applied.returncode != 0:
        raise MinreproError(
            f"{diff.name} does not apply to {library}@{base[:12]}: {applied.stdout.strip().splitlines()[-1:]}"
        )
    header = text[: text.index("\n---\n")]
    subject = re.search(r"^Subject: (?:\[PATCH\] )?(.+)$", header, re.M)[1]
    description = header.split("\n\n", 1)[1].strip() if "\n\n" in header else ""
    _git(work, "commit", "-q", "-am", f"{subject}\n\n{description}", date=date)
    return subject, " ".join(applied.stdout.split()) or "applied as is"


RUFF_PIN = re.compile(r"""["'](ruff\s*(?:[=~<>!]=|[<>])\s*[\w.]+)["']""")


def ruff_requirement(work: Path) -> str:
    """The ruff the repository pins for `make quality` (setup.py's or pyproject's extras); a newer ruff has rules
    that flag code the branch never touched."""
    for name in ("setup.py", "pyproject.toml"):
        path = work / name
        if path.is_file() and (match := RUFF_PIN.search(path.read_text(encoding="utf-8"))):
            return match[1].replace(" ", "")
    return "ruff"


def kit_env(catalog: Catalog, library: str, envs: Path, ruff: str = "ruff", release: str | None = None) -> Path:
    """A tool-made env of the newest set with the library's test requirements and its ruff; for a kit made against a
    release, the set with the library at that release (its metadata then matches the code laid over it)."""
    env = envs / (f"kit-{library}-{release}" if release else f"kit-{library}")
    requirements = [str(r) for r in catalog.version_set("newest").requirements]
    if release:
        requirements = [r if not r.startswith(f"{library}==") else f"{library}=={release}" for r in requirements]
    create_env(env, requirements, wheelhouse_from_env(), label=f"kit {library}" + (f" {release}" if release else ""))
    # as `upstream-tests` does: only the set's pins are forced into the env (patches land there); the test tools may
    # come from the torch site it sees (scipy on a CUDA image, which a small wheelhouse leaves out: a 35 MB wheel)
    pip_install(env, TEST_REQUIREMENTS[library] + [ruff], wheelhouse_from_env())
    return env


def _ruff_findings(ruff: str, work: Path, files: list[str]) -> dict[tuple[str, str], int]:
    """(file, rule) -> count, from `ruff check` under the repository's own config."""
    done = subprocess.run([ruff, "check", "--output-format=concise", *files], cwd=work, capture_output=True, text=True)
    found: dict[tuple[str, str], int] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^(.+?):\d+:\d+: (\S+)", line)
        if match:
            found[(match[1], match[2])] = found.get((match[1], match[2]), 0) + 1
    return found


def _is_test(key: str, node_id: str) -> bool:
    """Whether a JUnit key is this test, or one case of it when parametrized (`name[4bit]`)."""
    name = node_id.rsplit("::", 1)[-1]
    return key.endswith("::" + name) or re.search(rf"::{re.escape(name)}\[.*\]$", key) is not None


def _outcome(run: TestRun, node_id: str) -> str:
    """The test's outcome; a parametrized test (`name[4bit]`, `name[8bit]`) failed if any of its cases failed."""
    found = [o for t, o in run.outcomes.items() if _is_test(t, node_id)]
    if not found:
        return "not collected"
    return next((o for o in ("failed", "passed") if o in found), found[0])


def node_id(test_file: str, key: str) -> str:
    """pytest's node id of a JUnit `classname::name` key: `tests.test_other.TestX::test_y[a]` in
    `tests/test_other.py` -> `tests/test_other.py::TestX::test_y[a]`."""
    classname, name = key.split("::", 1)
    module = test_file[:-3].replace("/", ".")
    classes = classname[len(module) + 1 :].split(".") if classname.startswith(module + ".") else []
    return "::".join([test_file, *classes, name])


def _deselect(main: TestRun, test_file: str) -> list[str]:
    return [
        arg
        for key, outcome in main.outcomes.items()
        if outcome == "failed"
        for arg in ("--deselect", node_id(test_file, key))
    ]


@dataclass(frozen=True)
class KitRuns:
    """How a kit's proof runs: the timeout of each run (the case's, each pytest's), and where progress goes."""

    timeout: float
    log: Callable[[str], None]


def _file_on_main(env: Path, clone: RepoRef, base: str, proof: KitProof, settings: KitRuns) -> TestRun:
    """The new test's file's outcomes at the base commit (with the proof's pytest options), in `env` with the base's
    package laid over; kept per (commit, file, env's requirements): every kit of a library on the same main shares
    it (peft's test_other.py takes minutes offline, most of it in tests that need the hub)."""
    test_file, pytest_args, log = proof.test.split("::")[0], proof.pytest_args, settings.log
    requirements = {k: v for k, v in (read_marker(env) or {}).items() if k != "refs"}  # the overlay is set below
    key = hashlib.sha256(json.dumps([base, test_file, requirements, pytest_args], sort_keys=True).encode()).hexdigest()[
        :16
    ]
    cached = clone.gitdir.parent / "baselines" / f"{key}.json"
    if cached.is_file():
        data = json.loads(cached.read_text(encoding="utf-8"))
        log(f"{test_file} at {base[:10]} (main): cached, {len(data['outcomes'])} tests")
        return TestRun(data["outcomes"], data["seconds"])
    overlay_env(env, [clone], {clone.library: base})
    _git(clone.gitdir, "checkout", "-q", base)
    log(f"{test_file} at {base[:10]} (main)")
    run = run_tests(
        env,
        clone.gitdir,
        ["-o", "addopts=", *pytest_args, test_file],
        cached.with_suffix(".xml"),
        PytestConditions(settings.timeout, offline=True),
    )
    cached.write_text(
        json.dumps({"base": base, "test_file": test_file, "outcomes": run.outcomes, "seconds": run.seconds}),
        encoding="utf-8",
    )
    return run


def prove(proof: KitProof, case: Case, work: Path, env: Path, settings: KitRuns) -> KitProof:
    """Before/after the fix, in `env` with the branch's package laid over (`work`: the branch's clone, as
    `build_branch` left it): the new test, its whole file, ruff."""
    timeout, log, library = settings.timeout, settings.log, proof.library
    clone = RepoRef(library, work, proof.branch)
    where = probe(str(env_python(env)))
    proof.machine = f"{where.label}, torch {where.versions.get('torch')}"
    native_into_checkout(site_packages(env), library, work)
    test_file, name = proof.test.split("::")[0], proof.test.rsplit("::", 1)[-1]
    base = _git(work, "rev-parse", f"{proof.commits[0]}~1").strip()
    runs = {"main": _file_on_main(env, clone, base, proof, settings)}
    # before: only the new test (the file's other tests are main's, run once in `_file_on_main`); after: the file,
    # less what fails on main, which cannot be a new failure (peft's hub tests each sleep through their retries)
    selections = {"before": [test_file, "-k", name], "after": [test_file, *_deselect(runs["main"], test_file)]}
    for label, commit in (("before", proof.commits[0]), ("after", proof.commits[-1])):
        overlay_env(env, [clone], {library: commit})
        _git(work, "checkout", "-q", commit)
        log(f"{proof.case}: {' '.join(selections[label][:3])} at the {label} commit {commit[:10]}")
        # `-o addopts=`: a repository's own pytest options (peft's --cov) need plugins its CI has and the env lacks
        # offline: a test that needs the hub fails (or skips) alike before and after, and costs no downloads
        runs[label] = run_tests(
            env,
            work,
            ["-o", "addopts=", *proof.pytest_args, *selections[label]],
            work.parent / f"{proof.case}-junit-{label}.xml",
            PytestConditions(timeout, offline=True),
        )
        run = run_script(case.script, python=str(env_python(env)), timeout=timeout, isolated=True)
        setattr(proof, f"case_{label}", run.raw_headline.splitlines()[0] if run.signature else "passes")
        if label == "after":  # a family fixed in two libraries (A: accelerate and bitsandbytes) fails otherwise
            proof.case_after_outcome = observe(case, run)[0]
            proof.case_after_printed = run.stdout.strip().splitlines()[-3:]
    _git(work, "checkout", "-q", proof.branch)
    proof.test_before, proof.test_after = _outcome(runs["before"], proof.test), _outcome(runs["after"], proof.test)
    proof.test_reasons = {
        label: reason
        for label in ("before", "after")
        for test, reason in runs[label].reasons.items()
        if _is_test(test, proof.test)
    }
    if "skipped" in (proof.test_before, proof.test_after):
        proof.not_shown = (
            f"the new test skipped ({proof.test_before} before, {proof.test_after} after) on {proof.machine}: "
            "only a skip here, neither the failure nor the fix is shown; it needs a machine with what it requires"
        )
    proof.file_new_failures = new_failures(runs["main"], runs["after"])
    proof.file_counts = {
        label: {o: runs[label].count(o) for o in ("passed", "failed", "skipped")} for label in ("main", "after")
    }
    failing = f"failing on {'the release' if proof.release else 'main'}, not rerun"
    proof.file_counts["after"][failing] = runs["main"].count("failed")
    changed = [
        n for n in _git(work, "diff", "--name-only", f"{proof.commits[0]}~1", "HEAD").split() if n.endswith(".py")
    ]
    ruff = str(env_python(env).with_name("ruff"))
    # `ruff check`: only what the branch adds counts (main may carry findings of its own)
    _git(work, "checkout", "-q", f"{proof.commits[0]}~1")
    before = _ruff_findings(ruff, work, changed)
    _git(work, "checkout", "-q", proof.branch)
    added = {
        key: n - before.get(key, 0) for key, n in _ruff_findings(ruff, work, changed).items() if n > before.get(key, 0)
    }
    proof.lint["ruff check"] = "ok" if not added else "; ".join(f"{f}: {rule} +{n}" for (f, rule), n in added.items())
    done = subprocess.run([ruff, "format", "--check", *changed], cwd=work, capture_output=True, text=True)
    proof.lint["ruff format --check"] = "ok" if done.returncode == 0 else (done.stdout + done.stderr).strip()[:600]
    proof.lint_tool = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip()
    return proof


def standalone(script: str) -> str:
    """The case as a maintainer runs it on main: without its PEP 723 block (it pins the release it was found on)."""
    return re.sub(r"\A# /// script\n(?:#.*\n)*?# ///\n", "", script).strip()


def _printed(lines: list[str]) -> str:
    return "\nIt printed:\n\n```\n" + "\n".join(lines) + "\n```" if lines else ""


def _new_failures_line(proof: KitProof) -> str:
    """ "none" claims something only where the file's other tests ran on main: a `-k` that left none there did not."""
    if not proof.file_measured:
        return "new failures: not measured (the pytest options left none of the file's tests to run on main)"
    return f"new failures: {', '.join(proof.file_new_failures) or 'none'}"


def _base_line(proof: KitProof) -> str:
    """Where the branch starts: main's commit, or the release's archive (and the test files it lacked)."""
    if not proof.release:
        return f"Fixes the failure below on `main` ({proof.base['commit'][:12]}, {proof.base['date']})."
    line = (
        f"Made against {proof.against}: the branch starts from the release's {proof.release['archive']} "
        f"(sha256 {proof.release['sha256'][:16]}...), committed as is"
    )
    outside = proof.release.get("tests_from_outside") or {}
    if outside:
        files = ", ".join(f"`{path}` (sha256 {digest[:16]}...)" for path, digest in sorted(outside.items()))
        line += (
            f"; the archive has no {files}: the kit took the copy given with `--release-tests` (which commit of the "
            "repository it comes from is not checked against the release's tag)"
        )
    return line + ". The fix applies there; it has not been tried on `main`."


def _skipped_line(proof: KitProof) -> str:
    """A test that only skipped proved nothing: say so where the description counts outcomes."""
    return f"\n- {proof.not_shown}" if proof.not_shown else ""


def describe_pr(case: Case, proof: KitProof, why: str) -> str:
    """The PR description, as the libraries' templates ask: what and why (the fix commit's message), the repro on
    main (or the release the kit was made against), before and after, the tests, the related threads."""
    threads = "\n".join(f"- {u}" for u in case.upstream) or "- none found"
    short = "`main`"
    if proof.release:
        name, _, version = proof.release["release"].partition("==")
        short = f"{name} {version}"
    return f"""# {proof.title}

## What does this PR do?

{why.strip()}

{_base_line(proof)} The fix is in {"the second commit" if len(proof.commits) == 2 else f"commits 2 to {len(proof.commits)} (each a fix of its own; the last needs the earlier ones)"};
the first adds `{proof.test.split("::")[-1]}` to `{proof.test.split("::")[0]}`, which fails without it.

## Reproduction (fails on {short if proof.release else "`main` and on the latest release"})

```python
{standalone(case.script.read_text(encoding="utf-8"))}
```

On {short} without the fix: `{proof.case_before}`
With the fix: {proof.case_after if proof.case_after == "passes" else f"`{proof.case_after}` (another library's part of the fix; the failure above is gone)"}.{_printed(proof.case_after_printed)}

## Tests

- new test at the test commit: **{proof.test_before}**; with the fix: **{proof.test_after}**{_skipped_line(proof)}
- `{proof.test.split("::")[0]}` on {short} / with this PR: {proof.file_counts.get("main")} / {proof.file_counts.get("after")};
  {_new_failures_line(proof)}
- ran on: {proof.machine or "not recorded"}
- pytest options beyond the repository's: {" ".join(proof.pytest_args) or "none"}
- lint ({proof.lint_tool}, the repository's config): {"; ".join(f"{k}: {v}" for k, v in proof.lint.items())}

## Related

{threads}
"""


def write_kit(proof: KitProof, work: Path, out: Path, description: str) -> None:
    series = out / "series"
    if series.exists():
        shutil.rmtree(series)
    _git(work, "format-patch", "-q", "-o", str(series.absolute()), f"{proof.commits[0]}~1..{proof.commits[-1]}")
    # read by maintainers on other machines: no path of this one
    (out / "PR.md").write_text(without_local_paths(description), encoding="utf-8")
    (out / "proof.json").write_text(
        json.dumps(scrubbed({**asdict(proof), "green": proof.green}), indent=2) + "\n", encoding="utf-8"
    )
