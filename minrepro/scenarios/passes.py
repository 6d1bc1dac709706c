"""Structured passes over scenario specs. Each pass is a plain function proposing simpler specs; the list
`SCENARIO_PASSES` is the registry and its order is the order they are tried (cheap, big cuts first). A
pass never judges: the driver renders each proposal and asks the oracle."""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Callable, Iterator

from .spec import TINY_TEXT, TOYS, Scenario

ScenarioPass = Callable[[Scenario], Iterator[Scenario]]


def _text(s: Scenario, **changes: object) -> Scenario:
    return replace(s, model=replace(s.model, text={**s.model.text, **changes}))


def to_toy(s: Scenario) -> Iterator[Scenario]:
    """Replace Gemma 4 by each toy; only a toy that fails the same way below the model survives."""
    if s.model.kind == "gemma4":
        for toy in TOYS:
            yield replace(s, model=replace(s.model, kind=toy))


def jump_to_tiny(s: Scenario) -> Iterator[Scenario]:
    """The biggest cut first: tiny dimensions in one step (an E2B checkpoint takes minutes to build; most
    failures do not depend on scale)."""

    if s.model.kind == "gemma4" and (s.model.text != TINY_TEXT or s.model.tower_scale != "tiny"):
        yield replace(s, model=replace(s.model, text=dict(TINY_TEXT), tower_scale="tiny"))


def drop_towers(s: Scenario) -> Iterator[Scenario]:
    if s.model.kind == "gemma4":
        if s.model.towers:
            yield replace(s, model=replace(s.model, towers=()))
        for tower in s.model.towers:
            yield replace(s, model=replace(s.model, towers=tuple(t for t in s.model.towers if t != tower)))


def shrink_towers(s: Scenario) -> Iterator[Scenario]:
    if s.model.kind == "gemma4" and s.model.towers and s.model.tower_scale != "tiny":
        yield replace(s, model=replace(s.model, tower_scale="tiny"))


def halve_layers(s: Scenario) -> Iterator[Scenario]:
    text = s.model.text
    if s.model.kind == "gemma4" and text["layer_repeat"] > 1:
        repeat = text["layer_repeat"] // 2
        layers = repeat * len(text["layer_types"])
        yield _text(s, layer_repeat=repeat, num_kv_shared_layers=min(text["num_kv_shared_layers"], layers // 2))


def halve_widths(s: Scenario) -> Iterator[Scenario]:
    text = s.model.text
    if s.model.kind == "gemma4" and text["hidden_size"] >= 128:  # multiples of 64 keep bnb's CPU kernels legal
        yield _text(s, hidden_size=text["hidden_size"] // 2, intermediate_size=text["intermediate_size"] // 2)


def halve_vocab(s: Scenario) -> Iterator[Scenario]:
    text = s.model.text
    if s.model.kind == "gemma4" and text["vocab_size"] >= 256:
        yield _text(s, vocab_size=text["vocab_size"] // 2, vocab_size_per_layer_input=text["vocab_size"] // 2)


def ddmin_device_map(s: Scenario) -> Iterator[Scenario]:
    """Drop one placement entry at a time (the catch-all "" stays)."""
    device_map = s.placement.device_map
    if isinstance(device_map, dict):
        for key in [k for k in device_map if k != ""]:
            yield replace(
                s, placement=replace(s.placement, device_map={k: v for k, v in device_map.items() if k != key})
            )


def drop_memory_options(s: Scenario) -> Iterator[Scenario]:
    if s.placement.max_memory:
        yield replace(s, placement=replace(s.placement, max_memory=None))
    if s.placement.offload_folder:
        yield replace(s, placement=replace(s.placement, offload_folder=False))


def drop_quant_options(s: Scenario) -> Iterator[Scenario]:
    if s.quant is None:
        return
    yield replace(s, quant=None)
    if s.quant.double_quant:
        yield replace(s, quant=replace(s.quant, double_quant=False))
    if s.quant.fp32_cpu_offload:
        yield replace(s, quant=replace(s.quant, fp32_cpu_offload=False))


def raw_dispatch(s: Scenario) -> Iterator[Scenario]:
    """PeftModel.from_pretrained -> the raw dispatch_model call it makes, then a plain get_peft_model."""
    if s.peft.call == "from_pretrained":
        yield replace(s, peft=replace(s.peft, call="dispatch_model"))
        yield replace(s, peft=replace(s.peft, call="get_peft_model", kwargs={}))
    elif s.peft.call == "dispatch_model":
        yield replace(s, peft=replace(s.peft, call="get_peft_model", kwargs={}))


def drop_peft_kwargs(s: Scenario) -> Iterator[Scenario]:
    for key in s.peft.kwargs:
        yield replace(s, peft=replace(s.peft, kwargs={k: v for k, v in s.peft.kwargs.items() if k != key}))


def simpler_action(s: Scenario) -> Iterator[Scenario]:
    if s.action == "generate":
        yield replace(s, action="forward")


SCENARIO_PASSES: list[ScenarioPass] = [
    to_toy,
    jump_to_tiny,
    drop_towers,
    shrink_towers,
    halve_layers,
    halve_vocab,
    halve_widths,
    ddmin_device_map,
    drop_memory_options,
    drop_quant_options,
    raw_dispatch,
    drop_peft_kwargs,
    simpler_action,
]
