"""The trigger report: which keyword values the failure needs. After the search, each keyword left in a call is
set back to its default (removed), and each boolean keyword the search dropped (because it equalled the default)
is flipped; a variant the oracle rejects marks that value as load-bearing. Load-bearing values that the search
had dropped from view come back explicitly, with a comment, so the script shows what triggers the bug."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from collections.abc import Callable

Outcomes = Callable[[list[str]], list[tuple[bool, str]]]  # (interesting, "pass" or the failure's headline)


@dataclass(frozen=True)
class Trigger:
    call: str  # the callee as written, e.g. "bnb.nn.Linear4bit"
    keyword: str
    value: str  # the value the failing script has (explicit, or the default it relied on)
    variant: str  # what was tried instead: "default" or the flipped value
    shown: bool  # whether the value was in the reduced script before the report
    load_bearing: bool  # the variant runs clean: the failure needs this value
    then: str = ""  # what the variant did ("pass", or the headline of what it hit)
    still_fails: bool = False  # the variant still fails the same way: the value does not matter

    @property
    def comment(self) -> str:
        return f"fails only with {self.keyword}={self.value}"

    @property
    def verdict(self) -> str:
        if self.load_bearing:
            return "load-bearing: explicit, commented"
        return "not needed" if self.still_fails else "needed by the call (the variant fails otherwise)"


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _callee(call: ast.Call) -> str:
    return ast.unparse(call.func)


def _variants(original: str, reduced: str) -> list[tuple[int, str, str, str, bool, str]]:
    """(call index in the reduced tree, callee, keyword, value, shown, variant source) for each test to make."""
    ours, theirs = ast.parse(reduced), ast.parse(original)
    dropped: dict[str, dict[str, ast.expr]] = {}
    for call in _calls(theirs):
        for kw in call.keywords:
            if kw.arg and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool):
                dropped.setdefault(_callee(call), {}).setdefault(kw.arg, kw.value)
    out = []
    for index, call in enumerate(_calls(ours)):
        callee, present = _callee(call), {kw.arg for kw in call.keywords}
        for k, kw in enumerate(call.keywords):
            if kw.arg is None:
                continue
            tree = copy.deepcopy(ours)
            target = _calls(tree)[index]
            del target.keywords[k]
            out.append((index, callee, kw.arg, ast.unparse(kw.value), True, ast.unparse(tree) + "\n"))
        for name, value in dropped.get(callee, {}).items():
            if name in present:
                continue
            tree = copy.deepcopy(ours)
            _calls(tree)[index].keywords.append(ast.keyword(name, ast.Constant(not value.value)))
            out.append((index, callee, name, repr(value.value), False, ast.unparse(tree) + "\n"))
    return out


def trigger_report(original: str, reduced: str, outcomes: Outcomes) -> list[Trigger]:
    """A value is load-bearing when the variant without it *runs clean*; a variant that fails some other way
    (a required argument removed) says nothing about the bug."""
    variants = _variants(original, reduced)
    answers = outcomes([v[-1] for v in variants]) if variants else []
    return [
        Trigger(
            callee,
            keyword,
            value,
            "default" if shown else str(not ast.literal_eval(value)),
            shown,
            not interesting and then == "pass",
            then,
            interesting,
        )
        for (_, callee, keyword, value, shown, _), (interesting, then) in zip(variants, answers, strict=False)
    ]


def make_explicit(reduced: str, triggers: list[Trigger]) -> str:
    """The reduced script with load-bearing values that were out of view written into their calls."""
    tree = ast.parse(reduced)
    for trigger in (t for t in triggers if t.load_bearing and not t.shown):
        for call in _calls(tree):
            if _callee(call) == trigger.call and trigger.keyword not in {kw.arg for kw in call.keywords}:
                call.keywords.append(ast.keyword(trigger.keyword, ast.parse(trigger.value, mode="eval").body))
                break
    return ast.unparse(tree) + "\n"


def annotate(source: str, triggers: list[Trigger]) -> str:
    """A trailing comment on the line that holds each load-bearing value (comments do not survive ast)."""
    lines = source.splitlines()
    for trigger in (t for t in triggers if t.load_bearing):
        needle = f"{trigger.keyword}={trigger.value}"
        for i, line in enumerate(lines):
            if needle in line and trigger.comment not in line:
                lines[i] = line + ("  # " if "#" not in line else "; ") + trigger.comment
                break
    return "\n".join(lines) + "\n"


def format_table(triggers: list[Trigger]) -> str:
    rows = ["| call | keyword | value | tried | then | verdict |", "|---|---|---|---|---|---|"]
    for t in triggers:
        then = "passes" if t.then == "pass" else f"`{t.then[:60]}`" if t.then else "?"
        rows.append(f"| `{t.call}` | {t.keyword} | `{t.value}` | {t.variant} | {then} | {t.verdict} |")
    return "\n".join(rows)
