"""Drift: what the catalog does on `latest` (the index's newest releases, resolved when it runs) against what the
manifest declares for `newest` (the named snapshot). Per case and control: still fails, now passes, fails differently,
newly fails (or still passes); per patch: whether the snapshot's diff still applies to the newer release, and whether
the patches still fix their cases there. The document `minrepro drift` records (`results/drift/latest-MACHINE.json`)
holds the runs, the releases they ran on and when they were resolved; `proposal` turns it into a unified diff of the
manifest that would move the snapshot, for a person to review.

Running (the envs, the bisection of a change) is `minrepro.cli.drift`'s; this module judges, renders and proposes.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minrepro.catalog.manifest import FAILING, Case, Catalog, script_metadata, stacking_order
from minrepro.catalog.run import CaseResult
from minrepro.envs import patching
from minrepro.envs.latest import LATEST, SNAPSHOT, Resolution
from minrepro.envs.sets import SETS_FILE
from minrepro.envs.venvs import site_packages

STILL_FAILS, NOW_PASSES, FAILS_DIFFERENTLY, NEWLY_FAILS = (
    "still fails",
    "now passes",
    "fails differently",
    "newly fails",
)
STILL_PASSES, NOT_RUN, UNDECLARED = "still passes", "not run here", "no declaration"
CHANGES = (NOW_PASSES, FAILS_DIFFERENTLY, NEWLY_FAILS)  # a case whose outcome on latest is not the snapshot's
# what a patch does on latest
SAME_RELEASE, OWN_VARIANT, APPLIES, OFFSET = "same release", "a variant for this release", "applies", "applies, offset"
NO_LONGER_APPLIES, UPSTREAM, NOT_FOR_SNAPSHOT = "no longer applies", "already in this release", "no variant for newest"
PATCH_CHANGES = (NO_LONGER_APPLIES, UPSTREAM)


def classify(declared: str | None, observed: str) -> str:
    """One case's drift: its outcome on latest against the snapshot's declaration."""
    if observed == "skipped":
        return NOT_RUN
    if declared is None:
        return UNDECLARED
    if declared in FAILING:
        return NOW_PASSES if observed == "pass" else STILL_FAILS if observed == declared else FAILS_DIFFERENTLY
    return STILL_PASSES if observed == "pass" else NEWLY_FAILS


@dataclass
class CaseDrift:
    case: str
    family: str  # "control" for a control
    declared: str | None  # the snapshot's (newest's) declaration
    observed: str  # on latest: pass | fail | fail-other | skipped
    kind: str  # classify()
    headline: str = ""  # the failure's first line on latest, or why it did not run
    known: str | None = None  # what the manifest declares for latest, where it does
    changed_by: str = ""  # the release that changed the outcome, where a bisection named it

    @property
    def change(self) -> bool:
        return self.kind in CHANGES

    @property
    def declared_for_latest(self) -> bool:
        """The manifest already says the case behaves so on latest (a change someone has cataloged)."""
        return self.known is not None and self.known == self.observed


def drift_catalog(catalog: Catalog, resolution: Resolution) -> Catalog:
    """The catalog with `latest` as a set whose declared outcomes are the snapshot's: a run on it judges each case
    against newest (a verdict "differs" is a drift), the controls pass there."""
    return catalog.with_set(resolution.version_set(), {c.id: c.newest for c in catalog.cases})


def compare(catalog: Catalog, results: list[CaseResult], recorded: dict[str, str] | None = None) -> list[CaseDrift]:
    """Each run (cases and controls) as a drift from the snapshot, in the manifest's order. `recorded`: the headlines
    of the snapshot's recorded run on this machine (results/newest-MACHINE.json), where there is one: a case declared
    to fail with another failure first ("fail-other") fails differently where that failure's type changed."""
    cases = {c.id: c for c in catalog.cases}
    recorded = recorded or {}
    rows = []
    for r in results:
        case = cases.get(r.case)
        declared = case.newest if case else "pass"  # a control passes on every set
        kind = classify(declared, r.observed)
        before = recorded.get(r.case, "")
        if kind == STILL_FAILS and declared == "fail-other" and before and _kind_of(before) != _kind_of(r.headline):
            kind = FAILS_DIFFERENTLY
        rows.append(
            CaseDrift(
                r.case,
                r.family,
                declared,
                r.observed,
                kind,
                r.reason if r.observed == "skipped" else r.headline,
                case.declared(LATEST) if case else None,
            )
        )
    return rows


def _kind_of(headline: str) -> str:
    """`KeyError: 13` -> `KeyError`."""
    return headline.split(":", 1)[0].strip()


# --- patches -------------------------------------------------------------------------------------------------------


@dataclass
class PatchDrift:
    patch: str  # the logical id, `library/name`
    status: str  # SAME_RELEASE, OWN_VARIANT, APPLIES, OFFSET, NO_LONGER_APPLIES, UPSTREAM or NOT_FOR_SNAPSHOT
    variant: str = ""  # the file applied on latest (`library/file.diff`), or the snapshot's that no longer applies
    detail: str = ""  # which hunks failed, or moved by how many lines

    @property
    def change(self) -> bool:
        return self.status in PATCH_CHANGES


def check_patches(
    catalog: Catalog, snapshot: dict[str, str], versions: dict[str, str | None], env: Path
) -> tuple[list[PatchDrift], dict[str, patching.Patch]]:
    """Every patch of the catalog, in stacking order, on the releases of `env` (a patched twin the tool made, with no
    patch applied): the variant whose `Applies-to` names them, else the snapshot's carried forward where GNU patch
    (no fuzz) still lands it on top of those before it. What lands is applied on the way (a later one is checked
    against what it stacks on), then reverted. ({patch id: its row}, {patch id: the variant that applies there})."""
    rows, carried = [], {}
    site = site_packages(env)
    try:
        for pid in stacking_order(catalog):
            library = pid.split("/", 1)[0]
            own = patching.select([pid], versions)
            old = patching.select([pid], snapshot)
            if not own and not old:
                rows.append(PatchDrift(pid, NOT_FOR_SNAPSHOT))
                continue
            patch = (own or old)[0]
            dry = patching.check_patch(patch, site)
            if any(r.status == "already applied" for r in dry):
                rows.append(PatchDrift(pid, UPSTREAM, patch.rel, "its change is in the release already"))
                continue
            failed = [f"{r.file} hunk {r.hunk}" for r in dry if r.status == "FAILED"]
            if failed or not dry:
                rows.append(PatchDrift(pid, NO_LONGER_APPLIES, patch.rel, ", ".join(failed) + " FAILED"))
                continue
            patching.apply_patches([patch], env)
            carried[pid] = patch
            moved = sorted({f"{r.offset:+d}" for r in dry if r.offset})
            if versions.get(library) == snapshot.get(library):
                status = SAME_RELEASE
            else:
                status = OWN_VARIANT if own else (OFFSET if moved else APPLIES)
            rows.append(PatchDrift(pid, status, patch.rel, f"offset {', '.join(moved)} lines" if moved else ""))
    finally:
        patching.revert_patches(env)
    return rows, carried


def chooser(carried: dict[str, patching.Patch]):
    """`proof.prove`'s `choose` on latest: the variants `check_patches` found to apply there."""

    def choose(ids: list[str], _versions: dict[str, str | None]) -> list[patching.Patch]:
        return [carried[pid] for pid in ids if pid in carried]

    return choose


PROOF_FIXES, PROOF_NO_LONGER, PROOF_MISSING, PROOF_UNNEEDED = (
    "its patches fix it",
    "its patches no longer fix it",
    "not all its patches apply",
    "passes without its patches",
)


def proof_status(row: dict[str, Any], carried: set[str], case: Case) -> str:
    """What a patch proof row on latest says of the case's patches there."""
    if row["verdict"] == "skipped":
        return NOT_RUN
    if row["unpatched"] == "pass":
        return PROOF_UNNEEDED
    if row["patched"] == "pass":
        return PROOF_FIXES
    return PROOF_NO_LONGER if set(case.patches) <= carried else PROOF_MISSING


# --- the document, the report, the proposal -------------------------------------------------------------------------


@dataclass
class DriftDocument:
    """What `minrepro drift` records: the releases, the runs, the judgments."""

    resolution: Resolution
    environment: dict[str, Any]  # machine, gpu, gpus, python, versions, cpu_flags, date (as `results_document`)
    results: list[dict[str, Any]]  # the CaseResult rows of the run on latest
    drift: list[CaseDrift]
    patches: list[PatchDrift] = field(default_factory=list)
    proof: dict[str, Any] | None = None  # proof.prove's document on latest, with `status` per case row
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "set": LATEST,
            "compared_with": SNAPSHOT,
            "latest": self.resolution.to_dict(),
            **self.environment,
            "cases": self.results,
            "drift": [asdict(d) for d in self.drift],
            "patches": [asdict(p) for p in self.patches],
            "proof": self.proof,
            "wall_seconds": round(self.seconds, 1),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DriftDocument:
        skip = {"set", "compared_with", "latest", "cases", "drift", "patches", "proof", "wall_seconds"}
        return cls(
            Resolution.from_dict(data["latest"]),
            {k: v for k, v in data.items() if k not in skip},
            data.get("cases", []),
            [CaseDrift(**d) for d in data.get("drift", [])],
            [PatchDrift(**p) for p in data.get("patches", [])],
            data.get("proof"),
            data.get("wall_seconds", 0.0),
        )

    def changes(self) -> list[str]:
        """One phrase per change: what makes `minrepro drift` exit non-zero."""
        found = [f"{d.case} {d.kind}" for d in self.drift if d.change]
        found += [f"{p.patch} {p.status}" for p in self.patches if p.change]
        for row in (self.proof or {}).get("cases", []):
            if row.get("status") == PROOF_NO_LONGER:
                found.append(f"{row['case']}: {PROOF_NO_LONGER}")
        for row in (self.proof or {}).get("controls", []):
            if row["verdict"] in ("harm", "differs"):
                found.append(f"control {row['control']}: {row['verdict']} with the patches")
        return found


def merged(recorded: DriftDocument, run: DriftDocument) -> DriftDocument:
    """A run of some cases (`minrepro drift CASE ...`) laid over the machine's recorded run on the same releases: its
    cases' rows, drift and proofs replace theirs, the others stay; each such run is named in `also_ran` (a two-GPU
    box's cases beside a one-GPU box's run). A run on other releases replaces the record instead."""
    if recorded.resolution.pins != run.resolution.pins:
        return run
    ran = {d.case for d in run.drift}

    def kept(rows: list, key) -> list:
        return [row for row in rows if key(row) not in ran]

    proof = recorded.proof
    if run.proof is not None:
        proof = dict(recorded.proof or run.proof)
        proof["cases"] = kept((recorded.proof or {}).get("cases", []), lambda r: r["case"]) + run.proof["cases"]
    environment = dict(recorded.environment)
    where = {k: run.environment.get(k) for k in ("machine", "gpu", "gpus", "date")}
    environment["also_ran"] = [*environment.get("also_ran", []), {"cases": sorted(ran), **where}]
    patched = {p.patch: p for p in run.patches}
    return DriftDocument(
        recorded.resolution,
        environment,
        kept(recorded.results, lambda r: r["case"]) + run.results,
        kept(recorded.drift, lambda d: d.case) + run.drift,
        [patched.pop(p.patch, p) for p in recorded.patches] + list(patched.values()),
        proof,
        recorded.seconds + run.seconds,
    )


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _family_kind(rows: list[CaseDrift]) -> str:
    kinds = list(dict.fromkeys(d.kind for d in rows))
    changed = [k for k in kinds if k in CHANGES]
    return ", ".join(changed or kinds)


def _change_line(d: CaseDrift) -> str:
    since = f", since {d.changed_by}" if d.changed_by else ""
    known = f"; the manifest declares {LATEST} = {d.known!r}" if d.known else ""
    what = f": {_clip(d.headline, 110)}" if d.observed != "pass" else ""
    family = "control" if d.family == "control" else f"family {d.family}"
    return f"- {family}, `{d.case}`: {d.kind} (newest declares {d.declared!r}){since}{known}{what}"


def format_report(doc: DriftDocument, catalog: Catalog) -> str:
    """The drift per family (its cases and their patch proofs on latest), each change, the patches whose library
    moved, and a summary by kind."""
    res = doc.resolution
    lines = [
        f"latest: {res.describe()}",
        f"compared with newest: {', '.join(f'{d} {v}' for d, v in res.snapshot.items())}",
        "",
    ]
    proof = {row["case"]: row for row in (doc.proof or {}).get("cases", [])}
    rows = [("family", "on latest", "cases", "patches on latest")]
    for fid in dict.fromkeys(d.family for d in doc.drift):
        members = [d for d in doc.drift if d.family == fid]
        kind = _family_kind(members)
        cases = ", ".join(d.case + ("" if d.kind == kind else f" ({d.kind})") for d in members)
        statuses = [proof[d.case].get("status", "") for d in members if d.case in proof]
        patched = ", ".join(dict.fromkeys(s for s in statuses if s and s != NOT_RUN))
        rows.append(("control" if fid == "control" else fid, kind, cases, patched or "-"))
    lines.append(_table(rows))
    changes = [d for d in doc.drift if d.change]
    if changes:
        lines += ["", "Changes:", *(_change_line(d) for d in changes)]
    moved = [p for p in doc.patches if p.status not in (SAME_RELEASE, NOT_FOR_SNAPSHOT)]
    if moved:
        libraries = ", ".join(f"{d} {new}" for d, (_, new) in res.changed().items())
        lines += ["", f"Patches for the libraries that moved ({libraries}):"]
        lines.append(
            _table(
                [("patch", "on latest", "diff", "detail")]
                + [(p.patch, p.status, p.variant, p.detail or "-") for p in moved]
            )
        )
    controls = [c for c in (doc.proof or {}).get("controls", []) if c["verdict"] != "skipped"]
    if controls:
        lines += ["", "controls with every patch: " + "; ".join(f"{c['control']} {c['verdict']}" for c in controls)]
    lines += ["", *summary_lines(doc)]
    return "\n".join(lines)


def summary_lines(doc: DriftDocument) -> list[str]:
    def families(kind: str) -> str:
        found = [d for d in doc.drift if d.kind == kind]
        named = dict.fromkeys(
            d.family + (f" ({d.changed_by})" if d.changed_by else "") for d in found if d.family != "control"
        )
        controls = [d.case for d in found if d.family == "control"]
        return ", ".join([*named, *(f"control {c}" for c in controls)]) or "none"

    no_longer = [p.patch for p in doc.patches if p.status == NO_LONGER_APPLIES]
    upstream = [p.patch for p in doc.patches if p.status == UPSTREAM]
    no_fix = [row["case"] for row in (doc.proof or {}).get("cases", []) if row.get("status") == PROOF_NO_LONGER]
    changes = doc.changes()
    known = sum(d.declared_for_latest for d in doc.drift if d.change)
    return [
        f"still fails: {families(STILL_FAILS)}",
        f"now passes: {families(NOW_PASSES)}",
        f"fails differently: {families(FAILS_DIFFERENTLY)}",
        f"newly fails: {families(NEWLY_FAILS)}",
        f"patches that no longer apply: {', '.join(no_longer) or 'none'}"
        + (f"; already in the release: {', '.join(upstream)}" if upstream else "")
        + (f"; no longer fix their case: {', '.join(no_fix)}" if no_fix else ""),
        f"not run here: {families(NOT_RUN)}",
        f"{len(changes)} change(s) from the {SNAPSHOT} snapshot"
        + (f", {known} of them declared for {LATEST} in the manifest" if known else "")
        + f" ({doc.environment.get('machine', '?')}, {doc.seconds:.0f} s)",
    ]


# --- the proposal --------------------------------------------------------------------------------------------------


def proposal(
    doc: DriftDocument,
    catalog: Catalog,
    sets_file: Path = SETS_FILE,
    root: Path | None = None,
    patches_dir: Path = patching.PATCHES_DIR,
) -> str:
    """A unified diff (paths relative to `root`, the checkout) that would move the snapshot to what `doc` saw: newest's
    pins and date in sets.toml; each case run there declaring for newest what it did on latest (its `latest` line
    dropped: newest now says it), `fixed_in` gaining the release a bisection named for a case that now passes; the
    PEP 723 pins of the scripts that first fail on newest; the `Applies-to` of each snapshot patch that still lands on
    the moved release. Cases not run here keep their declarations. Nothing is written."""
    root = root or Path(__file__).resolve().parents[2]
    res = doc.resolution
    changed = res.changed()
    edits: dict[Path, tuple[str, str]] = {}
    text = sets_file.read_text(encoding="utf-8")
    edits[sets_file] = (text, _moved_sets(text, changed, res.date[:10]))
    manifest = catalog.path
    text = manifest.read_text(encoding="utf-8")
    new_outcomes = {}
    new_text = text
    for d in doc.drift:
        if d.family == "control" or d.observed == "skipped":
            continue
        new_outcomes[d.case] = d.observed
        fixed = [d.changed_by.replace(" ", "==", 1)] if d.kind == NOW_PASSES and _one_release(d.changed_by) else []
        new_text = _moved_case(new_text, d.case, d.observed, fixed)
    edits[manifest] = (text, new_text)
    for case in catalog.cases:
        outcomes = {**case.outcomes, SNAPSHOT: new_outcomes.get(case.id, case.newest)}
        if case.id in new_outcomes:
            outcomes.pop(LATEST, None)
        first = next((s for s, o in outcomes.items() if o == "fail"), "pinned")
        if first != SNAPSHOT:
            continue
        source = case.script.read_text(encoding="utf-8")
        moved = _moved_script(source, changed)
        if moved != source:
            edits[case.script] = (source, moved)
    for row in doc.patches:
        library = row.patch.split("/", 1)[0]
        if row.status in (APPLIES, OFFSET) and library in changed:
            path = patches_dir / row.variant
            text = path.read_text(encoding="utf-8")
            edits[path] = (text, _applies_also(text, f"{library}=={changed[library][1]}"))
    header = [
        f"# Moving the {SNAPSHOT} snapshot to the releases `minrepro drift` ran on {res.date[:10]} "
        f"({doc.environment.get('machine', '?')}): {', '.join(f'{d} {a} -> {b}' for d, (a, b) in changed.items())}.",
    ]
    skipped = sorted({d.case for d in doc.drift if d.observed == "skipped"})
    if skipped:
        header.append(
            f"# {len(skipped)} case(s) were not run there and keep their declarations ({', '.join(skipped)}): run "
            "`minrepro drift` where they run before applying this."
        )
    ports = [p.patch for p in doc.patches if p.status == NO_LONGER_APPLIES]
    if ports:
        header.append(
            f"# {len(ports)} patch(es) no longer apply and need a port to the new release: {', '.join(ports)}."
        )
    header.append("# Review it, then `git apply` it; nothing was changed.")
    parts = []
    for path, (old, new) in edits.items():
        if old == new:
            continue
        rel = _rel(path, root)
        parts.append(
            "".join(
                difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
                )
            )
        )
    return "\n".join(header) + "\n" + ("".join(parts) if parts else "# (no change to propose)\n")


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


def _one_release(changed_by: str) -> bool:
    """`transformers 5.24.0`, not a range or a sentence."""
    return bool(re.fullmatch(r"[\w.-]+ [\w.+!-]+", changed_by))


def _table_block(text: str, header: str) -> tuple[int, int]:
    """(start, end) of a TOML table's text, from its header to the next header."""
    start = text.index(header)
    following = re.compile(r"^\[", re.M).search(text, start + len(header))
    return start, following.start() if following else len(text)


def _moved_sets(text: str, changed: dict[str, tuple[str, str]], date: str) -> str:
    start, end = _table_block(text, f"[sets.{SNAPSHOT}]")
    block = text[start:end]
    for dist, (old, new) in changed.items():
        block = block.replace(f'"{dist}=={old}"', f'"{dist}=={new}"')
    block = re.sub(r'(?m)^description = ".*"$', f'description = "newest releases on {date}"', block, count=1)
    return text[:start] + block + text[end:]


def _moved_case(text: str, case_id: str, outcome: str, fixed: list[str]) -> str:
    marker = f'id = "{case_id}"'
    if marker not in text:
        return text
    start = text.rindex("[[", 0, text.index(marker))
    following = re.compile(r"^\[\[", re.M).search(text, text.index(marker))
    end = following.start() if following else len(text)
    block = text[start:end]
    block = re.sub(r'(?m)^newest = ".*"$', f'newest = "{outcome}"', block, count=1)
    block = re.sub(r'(?m)^latest = ".*"\n', "", block, count=1)
    if fixed:

        def add(match: re.Match[str]) -> str:
            entries = re.findall(r'"([^"]+)"', match[1])
            entries += [f for f in fixed if f not in entries]
            return "fixed_in = [" + ", ".join(f'"{e}"' for e in entries) + "]"

        block = re.sub(r"(?m)^fixed_in = \[(.*)\]$", add, block, count=1)
    return text[:start] + block + text[end:]


def _applies_also(text: str, pin: str) -> str:
    """A patch's header with `pin` added to its `Applies-to` (the diff is unchanged: it lands there as it is)."""

    def add(match: re.Match[str]) -> str:
        pins = [p.strip() for p in match[1].split(",")]
        return "Applies-to: " + ", ".join([*pins, pin] if pin not in pins else pins)

    return re.sub(r"(?m)^Applies-to: (.*)$", add, text, count=1)


def _moved_script(source: str, changed: dict[str, tuple[str, str]]) -> str:
    """The PEP 723 block's exact pins of the libraries that moved, moved; the rest of the script as it is."""
    if script_metadata(source) is None:
        return source
    start = source.index("# /// script")
    end = source.index("# ///", start + len("# /// script"))
    block = source[start:end]
    for dist, (old, new) in changed.items():
        block = block.replace(f'"{dist}=={old}"', f'"{dist}=={new}"')
    return source[:start] + block + source[end:]
