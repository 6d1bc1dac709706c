"""Failure signatures: what a failure *is*, as a small value compared by equality.

Modelled on Hypothesis' ``InterestingOrigin``: two runs of one bug give equal signatures even when line
numbers, tensor values, addresses or paths differ, and the same message raised from user code differs
from one raised through library frames, because library frames are part of the value.
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from collections.abc import Iterable

# Frames in these packages are plumbing (module call machinery, meta kernels): the bug is "owned" by the
# innermost frame outside them, e.g. bitsandbytes' ``QuantState.as_dict`` rather than torch's meta kernel.
SUBSTRATE = frozenset({"torch"})

KINDS = ("exception", "signal", "timeout", "cuda-error", "oom", "exit")


@dataclass(frozen=True, order=True)
class Frame:
    """One library frame: the import package, the dotted module and the function (qualified if known)."""

    package: str
    module: str
    function: str

    def __str__(self) -> str:
        return f"{self.module}:{self.function}"

    def plain(self) -> Frame:
        """The frame with its bare function name: pasted tracebacks carry no class names."""
        return replace(self, function=self.function.rsplit(".", 1)[-1])


RAISERS = ("library", "script", "other")  # who raised: a library frame, the script's own code, anything else


@dataclass(frozen=True)
class Signature:
    """The identity of a failure. ``frames`` lists library frames outermost first, each once. ``raised_by`` says
    whose frame raised it: the same message raised by the script's own code (a decoy, or a reduction that kept
    the symptom and lost the library's part) is another failure even with library frames above it as callers."""

    kind: str
    type: str
    message: str
    frames: tuple[Frame, ...] = ()
    causes: tuple[str, ...] = field(default=())
    raised_by: str = ""  # one of RAISERS; "" where it does not apply (timeouts, signals, exits)

    @property
    def headline(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    @property
    def owner(self) -> Frame | None:
        """The innermost library frame outside the substrate (or the innermost of all, if all are)."""
        outside = [f for f in self.frames if f.package not in SUBSTRATE]
        chosen = outside or list(self.frames)
        return chosen[-1] if chosen else None

    def origin(self) -> Signature:
        """The coarser identity used to say 'same bug' across call paths: type, message and owner."""
        owner = self.owner
        return replace(self, frames=(owner,) if owner else (), causes=())

    def is_tail_of(self, other: Signature) -> bool:
        """Same failure entered lower down: same kind, type, message and causes, and these library frames are
        the innermost frames of ``other`` (a toy that calls `dispatch_model` itself instead of through PEFT)."""
        n = len(self.frames)
        same = (self.kind, self.type, self.message, self.causes, self.raised_by) == (
            other.kind,
            other.type,
            other.message,
            other.causes,
            other.raised_by,
        )
        if not other.frames:  # raised in the script itself (an assertion): nothing below it to enter
            return same and n == 0
        return same and n > 0 and other.frames[len(other.frames) - n :] == self.frames

    def coarse(self) -> Signature:
        """The origin with a bare owner function name: what can be compared with a pasted report."""
        origin = self.origin()
        return replace(origin, frames=tuple(f.plain() for f in origin.frames))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature:
        frames = tuple(Frame(**f) for f in data.get("frames", ()))
        return cls(
            data["kind"],
            data["type"],
            data["message"],
            frames,
            tuple(data.get("causes", ())),
            data.get("raised_by", ""),
        )

    def __str__(self) -> str:
        chain = " > ".join(str(f) for f in self.frames) or "(no library frames)"
        raiser = f", raised by {self.raised_by}" if self.raised_by else ""
        return f"[{self.kind}] {self.headline}{raiser}\n  via {chain}"


# --- message normalization -------------------------------------------------------------------------

_TENSOR_START = re.compile(r"(?:Parameter containing:\s*)?\b(?:tensor|Params4bit|Int8Params)\(")
_SIZE = re.compile(r"torch\.Size\(\[[^\]]*\]\)")
# Not after ">": a placeholder such as <num> stands where a word was, so "0/x" stays "<num>/x" (idempotent).
# Public: the catalog's headline regex frees the same spans.
PATH_RE = re.compile(r"(?<![\w.>])(?:[A-Za-z]:[\\/]|[\\/]|\.\.\.[\\/]?)[^\s'\"()\[\]{},:;<>]+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_SHAPE_LIST = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)+\s*\]")
_SHAPE_TUPLE = re.compile(r"\(\s*\d+(?:\s*,\s*\d+)+\s*,?\s*\)")
_SHAPE_X = re.compile(r"(?<![\w.])\d+(?:\s*x\s*\d+)+(?![\w.])")
_NUMBER = re.compile(r"(?<![A-Za-z_\d<])\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?![A-Za-z_\d>])")
_SPACE = re.compile(r"\s+")


def _replace_balanced(text: str, start: re.Pattern[str], token: str) -> str:
    """Replace ``name( ... )`` spans, parentheses balanced, by ``token`` (tensor reprs nest brackets)."""
    out, pos = [], 0
    for match in start.finditer(text):
        if match.start() < pos:
            continue
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out += [text[pos : match.start()], token]
        pos = i
    return "".join(out) + text[pos:]


def normalize_message(text: str) -> str:
    """Abstract the parts of a message that change between runs of one bug; idempotent."""
    text = _replace_balanced(text, _TENSOR_START, "<tensor>")
    text = _SIZE.sub("<shape>", text)
    text = PATH_RE.sub("<path>", text)
    text = _HEX.sub("<hex>", text)
    for shape in (_SHAPE_LIST, _SHAPE_TUPLE, _SHAPE_X):
        text = shape.sub("<shape>", text)
    text = _NUMBER.sub("<num>", text)
    return _SPACE.sub(" ", text).strip()


# A KeyError's message is the missing key's repr: data, like a number. transformers 5.8 keyed Gemma 4's
# shared_kv_states by layer type, so one lookup bug reads `KeyError: 22` on 5.7 and `KeyError: 'full_attention'`
# on 5.13; both are the same origin.
KEY_MESSAGE_TYPES = frozenset({"KeyError"})


def is_key_lookup(exc_type: str) -> bool:
    return exc_type.rsplit(".", 1)[-1] in KEY_MESSAGE_TYPES


def message_identity(exc_type: str, message: str) -> str:
    """The message as part of a failure's identity: normalized, and only the type for a missing key."""
    return "<key>" if is_key_lookup(exc_type) else normalize_message(message)


def classify(exc_type: str, message: str) -> str:
    """Which outcome kind an exception stands for: OOM and CUDA errors are outcomes of their own."""
    if exc_type.endswith(("OutOfMemoryError", "MemoryError")) or "out of memory" in message.lower():
        return "oom"
    if exc_type.endswith("AcceleratorError") or re.search(r"CUDA error|cudaError|CUBLAS_STATUS", message):
        return "cuda-error"
    return "exception"


# --- frames ---------------------------------------------------------------------------------------

_SITE = re.compile(r"[\\/](?:site|dist)-packages[\\/]", re.IGNORECASE)


def module_of_path(path: str) -> tuple[str, str] | None:
    """(package, dotted module) for a file inside an installed distribution, else None (user code).

    Understands site/dist-packages paths and the ``...pkg\\mod.py`` elision used in pasted reports."""
    match = _SITE.search(path)
    if match:
        rel = path[match.end() :]
    elif path.startswith("..."):
        rel = path.lstrip(".").lstrip("\\/")
    else:
        return None
    parts = [p for p in re.split(r"[\\/]", rel) if p]
    if not parts:
        return None
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return parts[0], ".".join(parts)


# A library's decorator plumbing around the script's own function (`@torch.no_grad()` calls it through
# `decorate_context`): the script's context, not the failure's path. In the identity, no reduction could drop it.
DECORATOR_PLUMBING = frozenset({"torch.utils._contextlib"})


def unique_frames(frames: Iterable[Frame]) -> tuple[Frame, ...]:
    """Each frame once, first occurrence kept: recursion depth (nested modules, hook trees) varies. Decorator
    plumbing (`DECORATOR_PLUMBING`) is left out."""
    seen: dict[Frame, None] = {}
    for frame in frames:
        if frame.module not in DECORATOR_PLUMBING:
            seen.setdefault(frame, None)
    return tuple(seen)


def frames_from_records(records: Iterable[dict[str, Any]]) -> tuple[Frame, ...]:
    """Library frames from the bootstrap's structured records (module names come from the frame)."""
    frames = []
    for rec in records:
        if rec.get("library"):
            module = rec["module"]
            frames.append(Frame(module.split(".")[0], module, rec["function"]))
    return unique_frames(frames)


# --- text tracebacks (faulthandler dumps, scripts that print and exit, pasted reports) -----------

_TB_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+),? in (?P<func>[^\s]+)', re.MULTILINE)
_STDLIB_PATH = re.compile(r"[\\/]lib[\\/]python\d\.\d+[\\/](?!(?:site|dist)-packages[\\/])|^<frozen ")
_EXC_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Failure|Fault))(?:: (?P<msg>.*))?$"
)


def _stdlib_record(record: dict[str, Any]) -> bool:
    return not record.get("library") and (record.get("module") or "").split(".")[0] in sys.stdlib_module_names


def raiser_of_records(records: list[dict[str, Any]]) -> str:
    """Who raised, from the bootstrap's frame records (innermost last). A standard-library frame raises for its
    caller: transformers 5.8 made Gemma 4's shared_kv_states a mapping whose `__getitem__` (collections) raises
    the KeyError that the plain dict raised in modeling_gemma4 before."""
    callers = [r for r in records if not _stdlib_record(r)] or records
    if not callers:
        return "other"
    last = callers[-1]
    return "library" if last.get("library") else "script" if last.get("module") == "__main__" else "other"


def frames_from_text(text: str, most_recent_first: bool = False) -> tuple[Frame, ...]:
    frames = []
    for match in _TB_FRAME.finditer(text):
        where = module_of_path(match["path"])
        if where:
            frames.append(Frame(where[0], where[1], match["func"]))
    return unique_frames(reversed(frames) if most_recent_first else frames)


def parse_traceback(text: str) -> Signature | None:
    """The signature of the last Python traceback in ``text``, or None if it holds none."""
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    block = text[start:]
    lines = block.splitlines()
    for index, line in enumerate(lines[1:], start=1):
        match = _EXC_LINE.match(line)
        if match and not line.startswith(" "):
            message = "\n".join([match["msg"] or "", *_continuation(lines[index + 1 :])])
            exc_type = match["type"]
            frames = frames_from_text("\n".join(lines[:index]))
            paths = [m["path"] for m in _TB_FRAME.finditer("\n".join(lines[:index]))]
            paths = [p for p in paths if not _STDLIB_PATH.search(p)] or paths  # as in raiser_of_records
            raiser = "other" if not paths else "library" if module_of_path(paths[-1]) else "script"
            return Signature(
                classify(exc_type, message), exc_type, message_identity(exc_type, message), frames, (), raiser
            )
    return None


def _continuation(lines: list[str]) -> list[str]:
    """Lines of a multi-line exception message, up to the next log record or blank line."""
    out = []
    for line in lines:
        if not line.strip() or line.startswith(("Traceback", "During handling", "The above exception")):
            break
        out.append(line)
    return out
