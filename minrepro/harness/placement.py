"""A traced run's placements as lines a person reads (`minrepro signature --placement`): every model load, every
accelerate dispatch (who made it, the map per device, the hooks it attached) and, when the run failed, the torch
modules on the failing stack with the devices of their weights, their hooks and the tensors they held. A pass then
says which branch it stood on; a cross-device failure says which side was where."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

Record = dict[str, Any]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{device}×{n}" for device, n in counts.items()) or "none"


def _load_line(record: Record) -> str:
    return (
        f"load    {record.get('caller', '?')}.from_pretrained: map {_counts(record.get('devices', {}))}"
        f" | weights {_counts(record.get('parameters', {}))}"
    )


def _dispatch_line(record: Record) -> str:
    hooks = (
        ""
        if record["status"] == "started"
        else (
            f" | hooks: execution {_counts(record.get('execution_devices', {}))},"
            f" offloading {record.get('offloading_hooks', 0)}, root's {record.get('root_execution_device')}"
        )
    )
    raised = " | raised" if record["status"] == "started" else ""
    return (
        f"dispatch by {record.get('caller', '?')}: map {_counts(record.get('devices', {}))},"
        f" main {record.get('main_device')}{hooks}{raised}"
    )


def _hooks(hooks: list[Record]) -> str:
    return (
        "; ".join(
            f"{h['type']}(execution {h['execution_device']}, io_same_device {h['io_same_device']}"
            f"{', offload' if h.get('offload') else ''})"
            for h in hooks
        )
        or "no hook"
    )


def _frame_lines(record: Record) -> list[str]:
    if "trace_error" in record:
        return [f"failing stack: not recorded ({record['trace_error']})"]
    lines = ["failing stack, innermost last (module: its weights / below it | hook | tensors in the frame):"]
    for m in record.get("modules", []):
        tensors = ", ".join(f"{k} {'/'.join(v)}" for k, v in m["tensors"].items()) or "none"
        side = "".join(f", {k} {v}" for k, v in m.get("side_tensors", {}).items())  # INT8/4-bit statistics
        lines.append(
            f"  {m['function']} [{m['module'] or m['class']}]: {_counts(m['weights'])}{side}"
            f" / {_counts(m['weights_below'])} | {_hooks(m['hooks'])} | {tensors}"
        )
    return lines


def merged_dispatches(trace: tuple[Record, ...] | list[Record]) -> list[Record]:
    """The records in order, each dispatch once: its 'started' record completed by its 'returned' one. A dispatch that
    raised keeps only 'started'; records of other events between the two do not break the pair."""
    out: list[Record] = []
    open_at: int | None = None  # where the dispatch under way started
    for record in trace:
        if record.get("event") == "dispatch_model" and record["status"] == "returned" and open_at is not None:
            out[open_at], open_at = {**out[open_at], **record}, None
            continue
        if record.get("event") == "dispatch_model":
            open_at = len(out)
        out.append(dict(record))
    return out


def dispatch_calls(trace: tuple[Record, ...] | list[Record]) -> list[Record]:
    """One record per dispatch_model call, in order."""
    return [r for r in merged_dispatches(trace) if r.get("event") == "dispatch_model"]


VIEWS: dict[str, Callable[[Record], list[str]]] = {
    "from_pretrained": lambda r: [_load_line(r)] if r.get("status") != "started" else [],  # placed once it returns
    "dispatch_model": lambda r: [_dispatch_line(r)],
    "failure": _frame_lines,
}


def placement_lines(trace: tuple[Record, ...] | list[Record]) -> list[str]:
    """What the run placed and where it failed, in order; events without a view (PEFT's adapter config) left out."""
    lines = [
        line for record in merged_dispatches(trace) for line in VIEWS.get(record.get("event", ""), lambda _: [])(record)
    ]
    return lines or ["no model load or dispatch was traced"]
