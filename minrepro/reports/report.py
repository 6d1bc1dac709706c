"""Issue drafts for maintainers, one per catalog case, following the target repository's bug template.

Everything comes from recorded runs (results/*.json, results/bisect, results/patched) and the environment
the case ran in; the tool only drafts: it never files or posts anything (transformers' contributing guide
asks that agents do not open issues).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from packaging.version import Version

from minrepro.catalog.manifest import Case, Catalog, script_metadata
from minrepro.dirs import cache
from minrepro.errors import MinreproError
from minrepro.reports.bisect import BisectResult, CommitBisect
from minrepro.catalog.matrix import read_results_file, recorded_runs_of
from minrepro.envs.patching import PATCHES_DIR, load_patches
from minrepro.envs.sets import load_sets
from minrepro.catalog.run import observe
from minrepro.harness.probe import Environment
from minrepro.harness.runner import RunResult
from minrepro.harness.signature import Signature

REPOSITORIES = {
    "transformers": "huggingface/transformers",
    "accelerate": "huggingface/accelerate",
    "peft": "huggingface/peft",
    "bitsandbytes": "bitsandbytes-foundation/bitsandbytes",
}
# The sections of each repository's bug-report form, in order.
TEMPLATES = {
    "transformers": ["System Info", "Who can help?", "Information", "Tasks", "Reproduction", "Expected behavior"],
    "accelerate": ["System Info", "Information", "Tasks", "Reproduction", "Expected behavior"],
    "peft": ["System Info", "Who can help?", "Reproduction", "Expected behavior"],
    "bitsandbytes": ["System Info", "Reproduction", "Expected behavior"],
}
# Library areas by module prefix (longest match wins): the "who can help" answer, without handles.
AREAS = {
    "accelerate.hooks": "accelerate, big model inference (device hooks)",
    "accelerate.big_modeling": "accelerate, big model inference (dispatch_model / cpu_offload)",
    "accelerate.utils.modeling": "accelerate, big model inference (set_module_tensor_to_device)",
    "accelerate.utils.operations": "accelerate, device placement (send_to_device)",
    "bitsandbytes.nn": "bitsandbytes, 4-bit modules (Linear4bit / Params4bit)",
    "bitsandbytes.functional": "bitsandbytes, quantization state (QuantState)",
    "peft.peft_model": "PEFT, adapter loading and dispatch (PeftModel)",
    "peft.tuners.lora": "PEFT, LoRA layers",
    "peft.tuners.tuners_utils": "PEFT, merging and unloading",
    "transformers.models.gemma4": "transformers, model: Gemma 4",
    "transformers.quantizers": "transformers, quantization: bitsandbytes",
}
SYSTEM_COMMANDS = {
    "transformers": ["transformers", "env"],
    "accelerate": ["accelerate", "env"],
    "bitsandbytes": ["python", "-m", "bitsandbytes"],
}


def target_library(case: Case, signature: dict[str, Any] | None) -> str:
    """Where the fix belongs: the first patch's library, else the owning function's, else the innermost
    library frame's."""
    if case.patches:
        return case.patches[0].split("/", 1)[0]
    if case.owner:
        return case.owner.split(".", 1)[0]
    owner = Signature.from_dict(signature).owner if signature else None
    if owner is not None:
        return owner.package
    for ref in case.upstream:  # where the existing reports live (peft#3169 for E)
        library = ref.split("#")[0].split("/")[-1]
        if library in REPOSITORIES:
            return library
    return "transformers"


def area(modules: list[str]) -> str:
    for module in modules:
        best = max((p for p in AREAS if module.startswith(p)), key=len, default=None)
        if best:
            return AREAS[best]
    return "the library maintainers"


def _same_machine(python: Path, recorded: dict[str, Any]) -> bool:
    """Whether this machine is the kind the run was recorded on: a CPU box's `transformers env` says nothing true of
    a failure recorded on two GPUs, and a report must not print it as the system it failed on."""
    return _machine_of(str(python)) == (recorded.get("machine"), recorded.get("gpu"), recorded.get("gpus"))


@functools.cache
def _machine_of(python: str) -> tuple[str, str | None, int | None]:
    # once per interpreter: `report --all` drafts forty cases from one or two envs, and a probe imports torch
    from minrepro.harness.probe import probe

    here = probe(python)
    return here.machine, here.gpu, here.gpus


def system_info(python: Path | None, recorded: dict[str, Any] | None) -> str:
    """What `transformers env`, `accelerate env` and `python -m bitsandbytes` print in the case's env; the
    recorded versions when that env is not available."""
    parts = list(_env_reports(str(python))) if python is not None and python.exists() else []
    if recorded:
        versions = ", ".join(f"{k} {v}" for k, v in recorded["versions"].items() if v)
        parts.append(
            f"Recorded run ({recorded['date']}): Python {recorded['python']}, {versions}; "
            f"{Environment.recorded(recorded).label}"
        )
    return "\n\n".join(parts) or "(no recorded run)"


@functools.cache
def _env_reports(python: str) -> tuple[str, ...]:
    """Each system command's output in that env, once per interpreter (three subprocesses that import torch)."""
    bindir = Path(python).parent
    parts = []
    for cmd in SYSTEM_COMMANDS.values():
        exe = [python, *cmd[1:]] if cmd[0] == "python" else [str(bindir / cmd[0]), *cmd[1:]]
        # the env's bin first on PATH: `accelerate env` looks itself up with `which`
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
        try:
            out = subprocess.run(exe, capture_output=True, text=True, timeout=180, env=env)
            text = (out.stdout or out.stderr).strip()
            if out.returncode != 0:  # a maintainer needs the versions, not our env's traceback
                last = (text.splitlines() or ["no output"])[-1]
                text = f"(failed in this env: {last})"
        except (OSError, subprocess.TimeoutExpired) as exc:
            text = f"(could not run: {exc})"
        parts.append(f"$ {' '.join(cmd)}\n{_tail(text, 40)}")
    return tuple(parts)


def _tail(text: str, lines: int) -> str:
    kept = text.splitlines()
    return "\n".join(kept if len(kept) <= lines else ["…", *kept[-lines:]])


def trace_tail(signature: dict[str, Any] | None, headline: str) -> str:
    if not signature:
        return "(no failure recorded)"
    lines = ["Traceback (library frames, normalized):"]
    lines += [f"  {f['module']}:{f['function']}" for f in signature.get("frames", [])]
    lines.append(headline)
    return "\n".join(lines)


def expected_line(source: str) -> str:
    """What should have happened: the case's own `Expected: ...` docstring line, else its last print reached (the
    expression itself read as an expectation gave "Expected: "logits on", model(...).device")."""
    if said := re.search(r"^Expected: (.+?)\.?$", ast.get_docstring(ast.parse(source)) or "", re.M):
        return said[1]
    prints = re.findall(r"^(print\(.*\))\s*$", source, re.M)
    return f"the script to run to its last line, `{prints[-1]}`" if prints else "the script to exit without an error"


def draft(case: Case, catalog: Catalog, results_dir: Path, python: Path | None = None) -> dict[str, Any]:
    """The report as a dict (title, repository, sections, body); `render_markdown` turns it into text."""
    runs = recorded_runs_of(case.id, results_dir) if results_dir.is_dir() else {}
    failing_set = case.failing_set()
    run = runs.get((failing_set, case.device)) or runs.get((failing_set, "cpu")) or runs.get((failing_set, "cuda"))
    if _entry(run, case.id) is None or _entry(run, case.id)["observed"] not in ("fail", "fail-other", "pass"):
        # the set it was declared to fail on was not recorded here: any recorded run in which it failed
        run = next(
            (doc for (_, _), doc in sorted(runs.items()) if (_entry(doc, case.id) or {}).get("observed") == "fail"), run
        )
    entry = _entry(run, case.id)
    if entry is None:
        raise MinreproError(
            f"no recorded run of {case.id} in {results_dir}: record one first (`minrepro run CASE "
            "--results DIR/<set>-<machine>.json`, or `minrepro check SCRIPT --set pinned,newest`)"
        )
    failing_set = run["set"] or failing_set
    if python is None:  # the cached env of that set, if one was made here (system info comes from it)
        candidate = cache("envs", failing_set) / "bin" / "python"
        python = candidate if candidate.exists() and _same_machine(candidate, run) else None
    signature = entry.get("signature") if entry else None
    headline = entry.get("headline", "") if entry else ""
    library = target_library(case, signature)
    repo = REPOSITORIES.get(library, "huggingface/transformers")
    source = case.script.read_text(encoding="utf-8")
    docstring = _docstring(source)
    summary = (docstring.splitlines()[0] if docstring else _last_statement(source)).rstrip(".")
    modules = [f["module"] for f in reversed((signature or {}).get("frames", []))]
    sections: dict[str, str] = {
        "System Info": "```\n" + system_info(python, run) + "\n```",
        "Who can help?": area([m for m in modules if m.startswith(library)] or modules),
        "Information": "- [ ] The official example scripts\n- [x] My own modified scripts",
        "Tasks": "- [x] My own task or dataset (give details below)",
        "Reproduction": _reproduction(case, source, headline, signature, failing_set),
        "Expected behavior": (f"{summary}.\n\n" if docstring else "")
        + f"Expected: {expected_line(source)}.\nActual: `{headline or 'see above'}`.",
    }
    extra = {
        "Versions": _version_table(case, runs, results_dir),
        "Where it shows up": scenario_evidence(case, results_dir / "scenarios")
        + explored_evidence(case, catalog, results_dir / "explore"),
        "Related": "\n".join(
            [f"- https://github.com/{ref.split('#')[0]}/issues/{ref.split('#')[1]}" for ref in case.upstream]
            + _known_cases(case, catalog, signature, headline)
        )
        or "- none found",
        "Suggested fix": (patched_runs(case, results_dir / "patched") if case.user_script and not case.patches else "")
        or _patches(case, library),
        "On main": on_main(case, results_dir),
    }
    if case.outcomes and all(o == "unreproduced" for o in case.outcomes.values()):
        title = f"[not reproduced yet] {summary}"
        sections["Expected behavior"] += f"\n\nNote: this script has not reproduced the report yet. {case.notes}"
    else:
        owner = Signature.from_dict(signature).owner if signature else None
        # an op registered under a throwaway name (bitsandbytes' `def _`) says nothing: its module does
        where = (f"`{owner.function}`" if owner.function.strip("_") else f"`{owner.module}`") if owner else library
        title = f"{headline.split(':', 1)[0] or 'Wrong result'} in {where}: {summary}"
    return {
        "case": case.id,
        "repository": repo,
        "title": title,
        "template": TEMPLATES[library] if library in TEMPLATES else TEMPLATES["transformers"],
        "sections": sections,
        "extra": extra,
    }


def on_main(case: Case, results_dir: Path) -> str:
    """Where the libraries' main was checked (`minrepro run --repo ... --results results/main/...`): the commits and
    the outcome there; and the PR kit, if one was proved (`minrepro kit`). Maintainers ask this first."""
    lines = []
    for path in sorted((results_dir / "main").glob("*.json")):
        document = read_results_file(path)
        row = next((r for r in document.get("cases", []) if r["case"] == case.id), None)
        if row is None or row["observed"] == "skipped":
            continue
        refs = ", ".join(f"{r['library']} `{r['commit'][:12]}` ({r.get('date')})" for r in document.get("refs", []))
        said = {"fail": "still fails", "pass": "passes"}.get(row["observed"], row["observed"])
        if not refs:  # a release newer than the newest set (transformers 5.24.0), recorded beside main's runs
            newest = load_sets()["newest"].pins()
            newer = ", ".join(
                f"{lib} {version}"
                for lib, version in document.get("versions", {}).items()
                if (lib in newest and version != newest[lib]) or (lib not in newest and lib != "torch")
            )
            lines.append(
                f"- {said} with {newer or 'the newest set'} (the newest set otherwise, {document['machine']}, "
                f"{document['date']})"
            )
            continue
        lines.append(
            f"- {said} on main ({refs}; the {document['set']} set's other libraries, {document['machine']}, "
            f"{document['date']})"
        )
    kit = results_dir / "kits" / case.id / "proof.json"
    if kit.is_file():
        proof = json.loads(kit.read_text(encoding="utf-8"))
        lines.append(
            f"- a fix with its regression test, against {proof['library']} main `{proof['base']['commit'][:12]}`: "
            f"`{proof['test']}` fails before and passes after ({'green' if proof['green'] else 'not green'}); "
            f"the series is in `results/kits/{case.id}/series/`"
        )
    return "\n".join(lines) or "- not checked on main yet (`minrepro run --set newest --repo LIB=GITDIR`)"


def _last_statement(source: str) -> str:
    """What a script without a docstring is about: its last statement (in a reduced script, the failing call)."""
    body = ast.parse(source).body
    text = ast.unparse(body[-1]).splitlines()[0] if body else "the script"
    return f"`{text if len(text) <= 70 else text[:67] + '...'}` fails"


def _known_cases(case: Case, catalog: Catalog, signature: dict[str, Any] | None, headline: str) -> list[str]:
    """Catalog cases that fail the same way (same owning function, a final line their signature matches): a
    user's script is then most likely that family, and its upstream references apply."""
    if not case.user_script or not signature:
        return []
    run = RunResult(1, "", "", 0.0, Signature.from_dict(signature), headline)
    out = []
    for known in catalog.cases:  # the catalog's own judgement: regex, owner and, where recorded, the seed's origin
        if known.owner and observe(known, run)[0] == "fail":
            refs = ", ".join(known.upstream) or "no upstream report yet"
            fixed = f"; fixed in {', '.join(known.fixed_in)}" if known.fixed_in else ""
            out.append(
                f"- minrepro catalog case `{known.id}` (family {known.family}) fails the same way "
                f"(`{known.owner}`, /{known.signature}/): {refs}{fixed}"
            )
    return out


def render_markdown(report: dict[str, Any]) -> str:
    out = [
        f"<!-- draft for https://github.com/{report['repository']}/issues/new (bug report); "
        f"minrepro only drafts: review, then file it yourself -->",
        f"# {report['title']}",
        "",
    ]
    for name in report["template"]:
        out += [f"### {name}", "", report["sections"][name], ""]
    for name, body in report["extra"].items():
        out += [f"### {name}", "", body, ""]
    return "\n".join(out)


def _entry(run: dict[str, Any] | None, case_id: str) -> dict[str, Any] | None:
    return next((c for c in (run or {}).get("cases", []) if c["case"] == case_id), None)


def _docstring(source: str) -> str:
    # the catalog's family labels mean nothing to a maintainer
    return re.sub(r"^Family [A-Z]'?[^:`]*: ", "", ast.get_docstring(ast.parse(source)) or "")


def _reproduction(case: Case, source: str, headline: str, signature: dict[str, Any] | None, failing_set: str) -> str:
    name = case.script.name
    pins = [d for d in (script_metadata(source) or {}).get("dependencies", [])]
    install = " ".join(f'"{p}"' for p in pins if p != "torch")
    return "\n".join(
        [
            f"A standalone script ({name}, {len(source.splitlines())} lines; PEP 723 pins inline):",
            "",
            "```python",
            source.rstrip(),
            "```",
            "",
            "Run it with its pinned dependencies:",
            "",
            "```bash",
            f"uv run {name}        # or: pip install torch {install} && python {name}",
            "```",
            "",
            f"Output (the {failing_set} versions):",
            "",
            "```",
            trace_tail(signature, headline),
            "```",
        ]
    )


def scenario_evidence(case: Case, directory: Path) -> str:
    """The recorded Gemma 4 scenario rows of this case's family (with the map PEFT's redispatch inferred, which
    says which branch each run took) and the scenario reductions that ended at this case's failure."""
    from ..scenarios.matrix import load_tables
    from ..scenarios.presets import SEED_REPORTS
    from ..scenarios.table import describe_placement

    presets = {name for name, r in SEED_REPORTS.items() if r.case == case.id}
    if not presets or not directory.is_dir():
        return "No seed scenario of this family (`minrepro scenario`, the seeds' Gemma 4 reports) was recorded."
    rows = [
        "| scenario | set | scale, machine | patches | outcome | what PEFT's redispatch did |",
        "|---|---|---|---|---|---|",
    ]
    order = {"pinned": 0, "reporter": 1, "newest": 2}
    docs = sorted(load_tables(directory), key=lambda d: (bool(d.get("patches")), order.get(d["scenario_set"], 9)))
    for doc in docs:  # the released dimensions only: the tiny tables are the same story, smaller
        for row in (r for r in doc["rows"] if r["preset"] in presets and "placement" in r and r["scale"] != "tiny"):
            outcome = "pass" if row["outcome"] == "pass" else f"`{row['headline'][:70]}`"
            rows.append(
                f"| {row['preset']} | {doc['scenario_set']} | {row['scale']}, {doc.get('gpu') or 'cpu'} | "
                f"{len(doc.get('patches', []))} | {outcome} | {describe_placement(row['placement'])} |"
            )
    out = [
        "Random-weight Gemma 4 checkpoints loaded as the reports do (`from_pretrained` with the reporter's "
        "BitsAndBytesConfig and a CPU/GPU split, then `PeftModel.from_pretrained`), each run traced:",
        "",
        *rows,
    ]
    for steps in sorted((directory / "reductions").glob("*.steps.json")):
        doc = json.loads(steps.read_text(encoding="utf-8"))
        record = doc.get("catalog_case") or {}
        if record.get("case") != case.id or (directory / "reductions" / steps.name) != steps:
            continue
        script = steps.with_name(steps.name.replace(".steps.json", ".min.py"))
        passes = ", ".join(s["pass"] for s in doc["steps"][1:]) or "none"
        same = (
            "the same failure as the script above (equal signature and owner)"
            if record.get("same_signature")
            else ("the same owning function" if record.get("same_owner") else "a different failure")
        )
        out += [
            "",
            f"`minrepro reduce --scenario {doc['preset']} --scale {doc['scale']} --device {doc['device']}` "
            f"reduced that scenario to a toy (spec passes: {passes}), {same}:",
            "",
            "```python",
            script.read_text(encoding="utf-8").rstrip(),
            "```",
        ]
    if len(rows) == 2:
        return "No seed scenario of this family (`minrepro scenario`) was recorded at the released dimensions."
    return "\n".join(out)


def explored_evidence(case: Case, catalog: Catalog, directory: Path) -> str:
    """The findings of `minrepro explore` (generated Gemma 4 scenarios, not written for this case) that are it."""
    from ..scenarios.explore import findings_of

    found = findings_of(case.id, directory, catalog) if directory.is_dir() else []
    if not found:
        return ""
    rows = [
        f"| {f['where']}, {f['set']} | `{f['spec']}` | `{f['headline'][:90]}` | {f['runs']} | {f['how']} |"
        for f in found
    ]
    return "\n\n" + "\n".join(
        [
            "`minrepro explore` met it in generated Gemma 4 scenarios (random-weight checkpoints, "
            "each spec a load, a map, a budget and PEFT's call):",
            "",
            "| exploration | spec | failure | runs | matched |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )


def _version_table(case: Case, runs: dict[tuple[str, str], dict[str, Any]], results_dir: Path) -> str:
    rows = ["| versions | machine | outcome |", "|---|---|---|"]
    for (_set_name, _machine), doc in sorted(runs.items()):
        entry = _entry(doc, case.id)
        if entry:
            libs = ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v and k != "tokenizers")
            rows.append(f"| {libs} | {Environment.recorded(doc).label} | {entry['observed']} |")
    bisect = results_dir / "bisect" / f"{case.id}.json"
    if bisect.is_file():
        doc = json.loads(bisect.read_text(encoding="utf-8"))
        rows.append("")
        rows.append("Bisection over releases (other packages at the script's pins):")
        for p in doc["packages"]:
            judged = ", ".join(f"{v}: {o}" for v, o in sorted(p["judged"].items(), key=lambda kv: Version(kv[0])))
            fixed = BisectResult(**p).fixed_range() if p["first_fixed"] else f"still fails at {p['good']}"
            rows.append(f"- {p['package']}: {fixed} ({judged})")
        for subset in doc.get("minimal_upgrades", []):
            rows.append(f"- minimal upgrade that makes it pass: {' + '.join(subset)}")
    rows.extend(_commit_bisections(case, results_dir))
    return "\n".join(rows)


def _commit_bisections(case: Case, results_dir: Path) -> list[str]:
    """`minrepro bisect --git` records (`<case>-<library>-commits.json`): the commit that broke or fixed it, its PR."""
    lines = []
    for path in sorted((results_dir / "bisect").glob(f"{case.id}-*-commits.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        found = CommitBisect.from_record(doc)
        base = ", ".join(f"{k} {v}" for k, v in doc["base"].items())
        lines += [
            "",
            f"Bisection over {found.library}'s first-parent commits {found.older}..{found.newer} (the "
            f"package laid over {base}): {found.sentence()}.",
        ]
    return lines


def patched_runs(case: Case, directory: Path) -> str:
    """For a user's script: what `check SCRIPT --set S --patched` recorded, the script with every catalog patch."""
    if not case.user_script or not directory.is_dir():
        return ""
    lines = []
    for path in sorted(directory.glob("*.json")):
        doc = read_results_file(path)
        entry = _entry(doc, case.id)
        if entry:
            outcome = "passes" if entry["observed"] == "pass" else f"still fails: `{entry.get('headline', '')[:100]}`"
            lines.append(
                f"- {doc['set']} ({doc['machine']}), with the {len(doc.get('patches', []))} catalog patches "
                f"that apply there: {outcome}"
            )
    return (
        ("With minrepro's fix prototypes applied (`minrepro check SCRIPT --set S --patched`):\n" + "\n".join(lines))
        if lines
        else ""
    )


def _patches(case: Case, library: str) -> str:
    if not case.patches:
        return "No fix prototype yet."
    by_id = {}
    for patch in load_patches(PATCHES_DIR):
        if "@" not in patch.name:
            by_id[patch.id] = patch
    out, elsewhere = [], []
    for pid in case.patches:
        patch = by_id.get(pid)
        if patch is None:
            continue
        if patch.library != library:  # the repository gets its own diff; another library's is a pointer
            elsewhere.append(
                f"- {patch.library}: {patch.subject} (`patches/{patch.rel}`, applies to {', '.join(patch.applies_to)})"
            )
            continue
        out += [
            f"**{patch.subject}** (made against {patch.made_against}; applies to {', '.join(patch.applies_to)}; "
            f"with it the script passes: `minrepro patch prove`)",
            "",
            "<details><summary>diff</summary>",
            "",
            "```diff",
            patch.path.read_text(encoding="utf-8").split("\n---\n", 1)[1].rstrip(),
            "```",
            "",
            "</details>",
            "",
        ]
    if elsewhere:
        out += [
            "minrepro's proof of this fix also stacks prototypes from other libraries, needed on some releases "
            "(`minrepro patch prove` shows the chain):",
            *elsewhere,
        ]
    return "\n".join(out)
