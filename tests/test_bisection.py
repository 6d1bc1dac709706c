"""Bisection: the search finds the flip with skips in the way, minimal upgrade sets are minimal, support
pins are dropped off the base, and recording rewrites only one line of the manifest."""

from __future__ import annotations

import shutil

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest
from packaging.version import Version

from minrepro.reports.bisect import BisectResult, Judge, bisect_package, first_flip, minimal_upgrades
from minrepro.catalog.manifest import MANIFEST, load_catalog, record_fixed_in


def flips(min_n: int, max_n: int):
    """(n releases, index of the first good one, indices that cannot be judged: never the two ends)."""
    return st.integers(min_n, max_n).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(1, n - 1),
            st.sets(st.integers(0, n - 1), max_size=n).map(lambda s: {i for i in s if 0 < i < n - 1}),
        )
    )


@settings(max_examples=200, deadline=None)
@given(flips(2, 40))
def test_first_flip_finds_the_first_good_release_despite_skips(params):
    n, flip, skips = params
    versions = [Version(f"1.{i}") for i in range(n)]
    calls = []

    def judge(v: Version) -> str:
        i = versions.index(v)
        calls.append(i)
        if i in skips:
            return "skip"
        return "bad" if i < flip else "good"

    found = versions.index(first_flip(versions, judge, "bad"))
    # the answer is the first good release, or the first judged release after a run of skips hiding it
    assert found >= flip
    assert all(i in skips for i in range(flip, found))
    assert len(calls) == len(set(calls))  # no release is judged twice


def test_minimal_upgrades_are_minimal():
    fixes = [{"a"}, {"b"}, {"c", "d"}]

    class FakeJudge:
        def __call__(self, overrides):
            return "good" if any(f <= set(overrides) for f in fixes) else "bad"

    targets = {p: Version("2") for p in "abcd"}
    assert minimal_upgrades(FakeJudge(), list("abcd"), targets) == [("a",), ("b",), ("c", "d")]


def test_support_pins_hold_only_the_base(tmp_path):
    catalog = load_catalog()
    [case] = catalog.select(["gemma4-shared-kv-keyerror"])
    base = {"transformers": "5.6.2", "tokenizers": "0.22.2", "peft": "0.19.1"}
    judge = Judge(case, base, frozenset({"transformers", "peft"}), tmp_path, tmp_path / "c.json", 10)
    assert "tokenizers==0.22.2" in judge.requirements({})
    reqs = judge.requirements({"transformers": Version("5.23.0")})
    assert "transformers==5.23.0" in reqs and "peft==0.19.1" in reqs
    assert not any(r.startswith("tokenizers") for r in reqs)


def test_record_fixed_in_rewrites_one_line(tmp_path):
    cases = tmp_path / "cases"
    shutil.copytree(MANIFEST.parent, cases)
    manifest = cases / MANIFEST.name
    before = manifest.read_text().splitlines()
    record_fixed_in(manifest, "params4bit-hf-initialized", ["accelerate==1.14.0"])
    after = manifest.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    assert len(before) == len(after) and len(changed) == 1
    assert changed[0][1] == 'fixed_in = ["accelerate==1.14.0"]'
    [case] = load_catalog(manifest).select(["params4bit-hf-initialized"])
    assert case.fixed_in == ("accelerate==1.14.0",)


class _TableJudge:
    """A judge answering from a table of outcomes, as the real one does from its env runs."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.case = type("C", (), {"id": "toy"})()
        self.cache: dict[str, dict[str, str]] = {}

    def __call__(self, overrides):
        return self.table[str(overrides["lib"])]


@settings(max_examples=200, deadline=None)
@given(flips(3, 30))
def test_bisect_names_one_release_only_when_nothing_between_was_skipped(params):
    n, flip, skips = params
    versions = [Version(f"1.{i}") for i in range(n)]
    table = {str(v): "skip" if i in skips else "bad" if i < flip else "good" for i, v in enumerate(versions)}
    result = bisect_package(_TableJudge(table), "lib", versions, versions[0], versions[-1])
    truth = versions[flip]
    undecided = [Version(v) for v in result.undecided]
    assert Version(result.last_bad) < truth <= Version(result.first_fixed)
    if not result.undecided:
        assert Version(result.first_fixed) == truth  # an exact answer is the true one
    else:
        assert truth in [*undecided, Version(result.first_fixed)]
        assert "at the latest" in result.fixed_range()


def test_a_fix_hidden_by_skips_is_reported_as_a_range():
    # transformers 5.8-5.22 once read as skips for the C case (another KeyError message): the bisection said
    # "first fixed in 5.23.0", a release that fixed nothing
    result = BisectResult(
        "transformers",
        "5.6.2",
        "5.23.0",
        "5.23.0",
        "5.7.0",
        {"5.7.0": "bad", "5.8.0": "skip", "5.23.0": "good"},
        ["5.8.0", "5.22.2"],
    )
    assert result.fixed_range().startswith("fixed after 5.7.0, by 5.23.0 at the latest")


def test_a_cached_run_is_judged_again_against_the_current_signature(tmp_path):
    # the cache keeps what a release did, not the verdict: C's regex once read 'full_attention' as another failure,
    # and a verdict cached under it would have stayed "skip" after the regex was fixed
    import json
    from dataclasses import replace

    from minrepro.harness.signature import Frame, Signature

    [case] = load_catalog().select(["gemma4-shared-kv-keyerror"])
    frame = Frame("transformers", "transformers.models.gemma4.modeling_gemma4", "Gemma4TextAttention.forward")
    seen = Signature("exception", "KeyError", "<key>", (frame,), (), "library")
    cache = tmp_path / "c.json"
    key = "transformers==5.13.0"
    cache.write_text(
        json.dumps(
            {
                key: {
                    "headline": "KeyError: 'full_attention'",
                    "raw_headline": "KeyError: 'full_attention'",
                    "signature": seen.to_dict(),
                }
            }
        )
    )

    def judge(regex: str) -> str:  # envs under tmp_path are never made: a re-run would fail loudly
        return Judge(replace(case, signature=regex), {}, frozenset(), tmp_path / "envs", cache, 10)(
            {"transformers": Version("5.13.0")}
        )

    assert judge(r"KeyError: \d+") == "skip"
    assert judge(case.signature) == "bad"


def test_pin_keeps_another_package_at_a_given_release(tmp_path):
    # family Y: transformers' fix passes only beside accelerate 1.15 (1.13 refuses a whole model on disk), so its
    # bisection keeps accelerate at 1.15.0 instead of the script's 1.13.0
    from minrepro.catalog.manifest import load_catalog
    from minrepro.errors import MinreproError
    from minrepro.reports.bisect import ReleaseRuns, judge_for

    [case] = load_catalog().select(["quantized-whole-disk-meta-weights"])
    judge = judge_for(case, ["transformers"], tmp_path, ReleaseRuns(10), {"accelerate": "1.15.0"})
    assert judge.base["accelerate"] == "1.15.0" and judge.base["transformers"] == "5.6.2"
    assert "accelerate==1.15.0" in judge.requirements({"transformers": Version("5.13.0")})
    for wrong in ({"transformers": "5.23.0"}, {"numpy": "2.0"}):  # the bisected package, one the script lacks
        with pytest.raises(MinreproError, match="--pin"):
            judge_for(case, ["transformers"], tmp_path, ReleaseRuns(10), wrong)


def test_pin_options_are_parsed_or_refused_in_one_line():
    from minrepro.cli.reports import _pins
    from minrepro.errors import MinreproError

    assert _pins(["Accelerate == 1.15.0"]) == {"accelerate": "1.15.0"}
    with pytest.raises(MinreproError, match="NAME==VERSION"):
        _pins(["accelerate>=1.15"])
