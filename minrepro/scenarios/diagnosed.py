"""Findings explained by a catalogued family although their signature is another one: the cause was read on the
failing run (`minrepro signature --placement`: which module held which side of a cross-device error) and a smaller
case of the family reproduces it. Matched by exploration and headline; each entry says what was seen and what was not
run, and the explore table says "by diagnosis", never that the family's signature matched."""

from __future__ import annotations

from dataclasses import dataclass

DIAGNOSED = "diagnosed:"  # the prefix a summary cell's case carries


@dataclass(frozen=True)
class Diagnosis:
    exploration: str  # results/explore/<this>/report.json
    headline: str  # the finding's headline starts with this
    case: str  # the catalog case whose mechanism it is
    evidence: str


DIAGNOSES = (
    Diagnosis(
        "cuda2-tiny-pinned",
        "RuntimeError: Expected all tensors to be on the same device, but got index is on cuda:0",
        "peft-redispatch-drops-input-hook",
        "two H200s, 2026-11-26: after PEFT's one-device redispatch the base's only hook had no execution device; "
        "the row's script passed with every patch of pinned and newest (AB's among them), not with AB's alone",
    ),
    Diagnosis(
        "cuda2-tiny-reporter",
        "RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:0",
        "dispatch-nested-entry-keeps-root-hook",
        "two H200s, 2026-11-26: layers.3.self_attn.q_proj, under the entry layers.3.self_attn (cuda:0), kept a hook "
        "moving its input to the root's cuda:1; the row's script passed on pinned, reporter and newest with every "
        "patch of each set (AC's among them), not with AC's alone",
    ),
    Diagnosis(
        "cuda2-tiny-newest",
        "RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:1",
        "dispatch-nested-entry-keeps-root-hook",
        "two H200s, 2026-11-26: layers.3.mlp.gate_proj, under the entry layers.3.mlp (cuda:1), kept a hook moving "
        "its input to the root's device, cuda:0 there because of AD (the root entry asked for cuda:1). With every "
        "patch the row gets past that Linear and fails on each set in transformers' Gemma4TextModel."
        "project_per_layer_inputs (per-layer inputs on cuda:0, their projection on cuda:1): a second bug, family "
        "AF (gemma4-per-layer-inputs-other-gpu)",
    ),
)


def diagnosed_of(exploration: str, group: dict) -> str | None:
    """`diagnosed:<case>` when a diagnosis covers this finding of that exploration."""
    for diagnosis in DIAGNOSES:
        if diagnosis.exploration == exploration and group["headline"].startswith(diagnosis.headline):
            return DIAGNOSED + diagnosis.case
    return None
