"""Rendering a scenario spec to a standalone script: Gemma 4 (build a random checkpoint and adapter, load it
the way the spec says, run the action) or one of the toys that stand in for it once the bug is known to live
below the model: a `Linear4bit` stack dispatched with raw `dispatch_model` (families A, B), a
`Gemma4ClippableLinear`-shaped wrapper (D), a shared-KV toy (C)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from .presets import BUDGET_PREFIX, resolve_budget
from .spec import AUDIO, TINY_TEXT, VISION, Scenario, scale_of, text_config


def render(scenario: Scenario) -> str:
    if scenario.model.kind != "gemma4":
        return TOY_RENDERERS[scenario.model.kind](scenario)
    return "\n".join(_gemma4_lines(scenario)) + "\n"


def checkpoint_key(scenario: Scenario) -> str:
    """Name of the spec's checkpoint (base + adapter) in the shared cache: the model and the adapter decide it."""
    return hashlib.sha1(
        json.dumps([asdict(scenario.model), asdict(scenario.adapter)], sort_keys=True).encode()
    ).hexdigest()[:12]


BUILT = "adapter/adapter_config.json"  # written last by a build: its presence under the cache key means built


def render_build(scenario: Scenario) -> str | None:
    """The rendering cut after its checkpoint build, run before the timed run so that a build of minutes never
    counts against a candidate's timeout. None where the build is cheap enough to stay in the run: a toy, or
    tiny dimensions (a second of work; a separate process would import torch once more per candidate)."""
    m = scenario.model
    if m.kind != "gemma4" or (m.text == TINY_TEXT and m.tower_scale == "tiny"):
        return None
    return "\n".join(_gemma4_build_lines(scenario)) + "\n"


def _header(scenario: Scenario, deps: list[str], summary: str) -> list[str]:
    return [
        "# /// script",
        '# requires-python = ">=3.10"',
        f"# dependencies = {json.dumps(['torch', *deps])}",
        "# ///",
        f'"""Scenario {scenario.name} (rendered by minrepro from a scenario spec): {summary}"""',
    ]


def _gemma4_build_lines(s: Scenario) -> list[str]:
    """Header, imports, config and the checkpoint build: the part of a rendering `render_build` runs alone."""
    m = s.model
    quantized = s.quant is not None
    summary = (
        f"Gemma 4 ({m.text['num_hidden_layers']} layers, hidden {m.text['hidden_size']}, towers "
        f"{', '.join(m.towers) or 'none'}), {'4-bit' if quantized else 'bf16'}, device_map {s.placement.device_map!r}, "
        f"{s.peft.call}, then {s.action}."
    )
    lines = _header(s, ["transformers", "peft", "accelerate"] + (["bitsandbytes"] if quantized else []), summary)
    classes = ["Gemma4Config", "Gemma4ForConditionalGeneration", "Gemma4TextConfig"]
    classes += ["Gemma4VisionConfig"] * ("vision" in m.towers) + ["Gemma4AudioConfig"] * ("audio" in m.towers)
    classes += ["BitsAndBytesConfig"] * quantized
    peft_names = (
        ["LoraConfig", "get_peft_model"]
        + (["PeftModel"] if s.peft.call == "from_pretrained" or s.action == "placement" else [])
        + (["get_peft_model_state_dict"] if s.action == "save_load" and s.peft.call != "from_pretrained" else [])
    )
    lines += [
        "import fcntl",
        "import os",
        "import tempfile",
        "from importlib.metadata import version",
        "",
        "import torch",
    ]
    if s.peft.call == "dispatch_model":
        lines += [f"from accelerate import dispatch_model{', infer_auto_device_map' if _dispatch_budget(s) else ''}"]
    lines += [
        f"from peft import {', '.join(sorted(peft_names))}",
        f"from transformers import {', '.join(sorted(classes))}",
        "",
    ]
    towers = []
    if "vision" in m.towers:
        towers.append(f"vision_config=Gemma4VisionConfig(**{VISION[m.tower_scale]!r})")
    if "audio" in m.towers:
        towers.append(f"audio_config=Gemma4AudioConfig(**{AUDIO[m.tower_scale]!r})")
    key = checkpoint_key(s)
    lines += [
        f"config = Gemma4Config(text_config=Gemma4TextConfig(**{text_config(m.text)!r}), {', '.join(towers)})".replace(
            ", )", ")"
        ),
        f"lora = LoraConfig(r={s.adapter.r}, lora_alpha={s.adapter.alpha}, target_modules={s.adapter.targets!r}, init_lora_weights=False)",
        "cache = os.environ.get('MINREPRO_SCENARIO_CACHE')  # reuse a checkpoint built for the same model",
        "# ... saved by the same releases: 5.23's Gemma 4 files fail 5.6's load (KeyError: 'axial')",
        "saved_by = version('transformers') + '-' + version('peft')",
        f"root = os.path.join(cache, {key!r}, saved_by) if cache else tempfile.mkdtemp()",
        "os.makedirs(root, exist_ok=True)",
        'with open(root + "/.build-lock", "w") as lock:  # concurrent runs build a shared checkpoint once',
        "    fcntl.flock(lock, fcntl.LOCK_EX)",
        f'    if not os.path.exists(root + "/{BUILT}"):',
        "        torch.manual_seed(0)",
        "        torch.set_default_dtype(torch.bfloat16)  # random weights, saved as the checkpoints are",
        '        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):  # an E2B init on CPU takes minutes',
        "            model = Gemma4ForConditionalGeneration(config)",
        '        model.save_pretrained(root + "/base")',
        '        get_peft_model(model, lora).save_pretrained(root + "/adapter")',
        "        del model",
        "        torch.set_default_dtype(torch.float32)",
    ]
    return lines


def _gemma4_lines(s: Scenario) -> list[str]:
    lines = _gemma4_build_lines(s)
    quantized = s.quant is not None
    load = ['root + "/base"', f"device_map={s.placement.device_map!r}", "dtype=torch.bfloat16"]
    if quantized:
        q = s.quant
        if q.load_in_8bit:
            lines.append(
                f"quant = BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload={q.fp32_cpu_offload})"
            )
        else:
            lines.append(
                f"quant = BitsAndBytesConfig(load_in_4bit={q.load_in_4bit}, bnb_4bit_quant_type={q.quant_type!r}, "
                f"bnb_4bit_use_double_quant={q.double_quant}, bnb_4bit_compute_dtype=torch.{q.compute_dtype}, "
                f"llm_int8_enable_fp32_cpu_offload={q.fp32_cpu_offload})"
            )
        load.append("quantization_config=quant")
    if s.placement.max_memory:
        load.append(f"max_memory={s.placement.max_memory!r}")
    if s.placement.offload_folder:
        load.append("offload_folder=tempfile.mkdtemp()")
    # inputs on the execution device, as users put them: an offloaded embedding's weight is on meta
    device, after_load = _input_device(s)
    reference_map, reference_device = _reference_placement(s)
    if s.action == "placement":  # the reference runs first on its own device; the ids follow the load under test
        lines += [_ids_on(reference_device), *_reference_lines(s, quantized, reference_map)]
    if "files" in s.checks:
        lines += FILES_BEFORE
    lines += _machine_lines(s)
    lines.append(f"base = Gemma4ForConditionalGeneration.from_pretrained({', '.join(load)})")
    lines += _peft_lines(s)
    lines += after_load
    if s.action != "placement":
        lines.append(_ids_on(device))
    elif device != reference_device:
        lines.append(f"ids = ids.to({device})")
    before = (
        "load_file(root + '/adapter/adapter_model.safetensors')"
        if s.peft.call == "from_pretrained"
        else "adapter_before"
    )
    lines += [
        line.replace("TOLERANCE", repr(s.tolerance)).replace("ADAPTER_BEFORE", before)
        for line in ACTION_LINES[s.action]
    ]
    if "files" in s.checks:
        lines += _files_after(s)
    return lines


def _ids_on(device: str) -> str:
    return f"ids = torch.tensor([[2, 3, 4, 5]], device={device})"


def _input_device(s: Scenario) -> tuple[str, list[str]]:
    """Where a user puts the inputs (a device expression), and the lines after the load that it needs."""
    placement = s.placement.device_map
    if isinstance(placement, dict) and len(set(map(str, placement.values()))) == 1 and s.uses_gpu:
        # one device for everything: no dispatch, so no hook moves the inputs there (the 2-GPU newest exploration
        # "found" `{"": 1}` with its ids on cuda:0: the harness's error, not the libraries')
        return repr(next(iter(placement.values()))), []
    if s.uses_gpu:
        return "0", []
    if s.inferred_map:
        # a split load has accelerate's hooks move the inputs from cuda; a load that fits one device has none,
        # and users put the inputs there (the two-GPU newest re-run's "index is on cuda:0" rows were "auto" maps
        # that put the whole model on cuda:1). A load wholly on disk runs where the box computes: 'disk' is no device.
        return (
            "next(iter(placed)) if len(placed) == 1 and 'disk' not in placed"
            " else 'cuda' if torch.cuda.is_available() else 'cpu'",
            ["placed = set(getattr(base, 'hf_device_map', {'': base.device}).values())"],
        )
    return repr("cpu"), []


def _reference_placement(s: Scenario) -> tuple[str, str]:
    """The placement check's one-device reference: its device_map and where its inputs go. "auto" names no device:
    the reference goes where the box has one (a GPU 0 on a CPU box is the user's error)."""
    if s.uses_gpu:
        return "{'': 0}", "0"
    if s.inferred_map:
        return "{'': 0} if torch.cuda.is_available() else 'cpu'", "'cuda' if torch.cuda.is_available() else 'cpu'"
    return "'cpu'", "'cpu'"


def _reference_lines(s: Scenario, quantized: bool, whole: str) -> list[str]:
    """Placement invariance: the same checkpoint and adapter on one device (no split, no offload), logits kept."""
    if s.peft.call != "from_pretrained":  # get_peft_model makes a new random adapter: nothing to compare with
        raise ValueError("the placement check compares loads of the saved adapter: it needs PeftModel.from_pretrained")
    quant = ", quantization_config=quant" if quantized else ""
    return [
        f"reference = Gemma4ForConditionalGeneration.from_pretrained(root + '/base', device_map={whole}, dtype=torch.bfloat16{quant})",
        "reference = PeftModel.from_pretrained(reference, root + '/adapter')",
        "quantized = lambda m: sum(type(x).__name__ in ('Linear4bit', 'Linear8bitLt') for x in m.modules())",
        "with torch.no_grad():",
        "    expected, expected_quantized = reference(input_ids=ids).logits.float().cpu(), quantized(reference)",
        "del reference",
    ]


def _machine_lines(s: Scenario) -> list[str]:
    """Make the box look like the spec's machine to accelerate's get_max_memory (after the build, which may need
    the whole GPU): ballast takes the GPU beyond `gpu_gib`; RAM reads `ram_gib` less this process's growth."""
    m = s.machine
    if m is None:
        return []
    lines = [
        f"# machine profile: {m.gpu_gib or 'all the'} GiB of GPU and {m.ram_gib or 'all the'} GiB of RAM free, as accelerate sees them"
    ]
    if m.gpu_gib is not None:
        lines.append("torch.cuda.empty_cache()  # what an in-process build left cached is not free to others")
        lines.append(
            f"ballast = torch.empty(max(0, torch.cuda.mem_get_info()[0] - int({m.gpu_gib} * 2**30)), dtype=torch.uint8, device=0)"
        )
    if m.ram_gib is not None:
        lines += [
            "import psutil",
            "rss0, memory = psutil.Process().memory_info().rss, psutil.virtual_memory",
            f"psutil.virtual_memory = lambda: memory()._replace(available=max(0, int({m.ram_gib} * 2**30) - "
            "(psutil.Process().memory_info().rss - rss0)))",
        ]
    return lines


def _peft_lines(s: Scenario) -> list[str]:
    device, scale = ("cuda" if s.uses_gpu else "cpu"), scale_of(s)
    given = {
        **s.peft.kwargs,
        **({"is_trainable": True} if s.action == "train_step" else {}),
    }  # frozen adapters: no grad
    kwargs = ", ".join(f"{k}={_kwarg(v, device, scale)}" for k, v in sorted(given.items()))
    if s.peft.call == "from_pretrained":
        return [f'model = PeftModel.from_pretrained(base, root + "/adapter"{", " + kwargs if kwargs else ""})']
    # a round trip of a new adapter compares with what it held before any dispatch (its saved files are another
    # random adapter: comparing with those made every such run a false "round-trip" finding)
    keep = (
        ["adapter_before = {k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(model).items()}"]
        if s.action == "save_load"
        else []
    )
    if s.peft.call == "get_peft_model":
        return ["model = get_peft_model(base, lora)", *keep]
    # what PeftModel.from_pretrained does on a model whose hf_device_map names cpu/disk, without PEFT's wrapper; also
    # what a user does who offloads a quantized model themselves: a map, or one inferred from a budget (as PEFT does)
    budget = _dispatch_budget(s)
    device_map = (
        f"infer_auto_device_map(model, max_memory={_kwarg(budget, device, scale)})"
        if budget
        else repr(s.peft.kwargs.get("device_map", s.placement.device_map))
    )
    return [
        "model = get_peft_model(base, lora)",
        *keep,
        f"dispatch_model(model, device_map={device_map}, offload_dir=tempfile.mkdtemp())",
    ]


def _dispatch_budget(s: Scenario) -> Any:
    """The budget a raw dispatch_model infers its map from (None: it is given a map)."""
    return s.peft.kwargs.get("max_memory") if "device_map" not in s.peft.kwargs else None


def _kwarg(value: Any, device: str, scale: str | None) -> str:
    if value == "OFFLOAD":
        return "tempfile.mkdtemp()"
    if isinstance(value, str) and value.startswith(BUDGET_PREFIX):
        budget = resolve_budget(value.removeprefix(BUDGET_PREFIX), device, scale)
        if budget is None:
            raise ValueError(f"budget {value} has no value for {device} at scale {scale or 'between scales'}")
        return repr(budget)
    return repr(value)


# Checkpoint immutability: every file of the base and adapter checkpoints hashed before the load, again at the end.
FILES_BEFORE = [
    "import hashlib, pathlib",
    "digest = lambda: {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(pathlib.Path(root).rglob('*')) if p.is_file() and p.name != '.build-lock'}",
    "files_before = digest()",
]


def _files_after(s: Scenario) -> list[str]:
    loader = "PeftModel.from_pretrained" if s.peft.call == "from_pretrained" else "from_pretrained"  # the catalog's I
    return [
        "changed = sorted(p.name for p, h in digest().items() if files_before.get(p) != h)",
        f'assert not changed, f"{loader} rewrote the base checkpoint: {{changed}}"',
        'print("checkpoint files unchanged")',
    ]


ACTION_LINES = {
    "forward": ["print(model(input_ids=ids).logits.shape)"],
    "generate": ["print(model.generate(input_ids=ids, max_new_tokens=3, do_sample=False))"],
    "merge": ["model = model.merge_and_unload()", "print(model(input_ids=ids).logits.shape)"],
    "dequantize_merge": [
        "model.dequantize()",
        "model = model.merge_and_unload()",
        "print(model(input_ids=ids).logits.shape)",
    ],
    "parity": [
        "import inspect",
        "from peft import LoraModel",
        "# a merge option that keeps adapter parity, where this peft offers one (the patched one does)",
        "option = {'dequantize': True} if 'dequantize' in inspect.signature(LoraModel.merge_and_unload).parameters else {}",
        "with torch.no_grad():",
        "    adapter_out = model(input_ids=ids).logits.float()",
        "    merged_out = model.merge_and_unload(**option)(input_ids=ids).logits.float()",
        "error = ((merged_out - adapter_out).norm() / adapter_out.norm()).item()",
        'assert error < TOLERANCE, f"merge into 4-bit diverges from the adapter output: relative error {error:.3f}"',
        'print(f"merged output matches the adapter: relative error {error:.6f}")',
    ],
    "forward_labels": ["print(model(input_ids=ids, labels=ids).loss)"],
    "train_step": [
        "model.train()",
        "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})",
        "loss = model(input_ids=ids, labels=ids).loss",
        "loss.backward()",
        "print('loss', loss.item())",
    ],
    # adapter round trip: what save_pretrained writes must be the adapter that was loaded
    "save_load": [
        "from safetensors.torch import load_file",
        "saved = tempfile.mkdtemp()",
        "model.save_pretrained(saved)",
        "after = load_file(saved + '/adapter_model.safetensors')",
        "before = ADAPTER_BEFORE",
        "differ = sorted(k for k in before if k not in after or not torch.equal(before[k], after[k].to(before[k].device)))",
        'assert not differ, f"save_pretrained wrote another adapter: {len(differ)} tensors differ"',
        "print('adapter round trip ok')",
    ],
    # placement invariance against `_reference_lines`, where both loads quantized the same layers
    "placement": [
        "with torch.no_grad():",
        "    out = model(input_ids=ids).logits",
        'assert out.device == ids.device, f"logits on {out.device.type}, input on {ids.device.type}"',
        "if quantized(model) == expected_quantized:",
        "    error = ((out.float().cpu() - expected).norm() / expected.norm()).item()",
        '    assert error < TOLERANCE, f"placement changes the logits: relative error {error:.3f}"',
        '    print(f"placement keeps the logits: relative error {error:.6f}")',
        "print('quantized layers: split', quantized(model), 'one device', expected_quantized)",
    ],
}


# --- toys that replace Gemma 4 -------------------------------------------------------------------------


def _toy_linear4bit_dispatch(s: Scenario) -> str:
    """Families A/B below PEFT: a LoRA-shaped container around an offloaded 4-bit layer, raw dispatch_model."""
    dq = s.quant is not None and s.quant.double_quant
    lines = _header(
        s,
        ["bitsandbytes", "accelerate"],
        "toy: Linear4bit in a parameter-less container, dispatched "
        "with a cpu/disk device_map as PEFT's redispatch does.",
    )
    lines += [
        "import tempfile",
        "",
        "import bitsandbytes as bnb",
        "import torch",
        "from accelerate import dispatch_model",
        "",
        f"inner = torch.nn.Sequential(bnb.nn.Linear4bit(64, 64, compress_statistics={dq}))",
        'model = torch.nn.Sequential(torch.nn.Sequential(inner), torch.nn.Linear(64, 64)).to("cpu")  # quantizes',
        "model[0][0][0].weight._is_hf_initialized = True  # what from_pretrained leaves on loaded parameters",
        'dispatch_model(model, device_map={"0": "disk", "1": "cpu"}, offload_dir=tempfile.mkdtemp())',
        "print(model(torch.randn(2, 64)).shape)",
    ]
    return "\n".join(lines) + "\n"


def _toy_clippable_wrapper(s: Scenario) -> str:
    """Family D: the wrapper shape (real layer at .linear, clamp buffers), under Gemma 4's class name so the
    error message stays the same."""
    lines = _header(s, ["peft"], "toy: a module shaped like Gemma4ClippableLinear targeted by LoRA.")
    lines += [
        "import torch",
        "from peft import LoraConfig, get_peft_model",
        "",
        "",
        "class Gemma4ClippableLinear(torch.nn.Module):",
        "    def __init__(self, n):",
        "        super().__init__()",
        "        self.linear = torch.nn.Linear(n, n, bias=False)",
        '        self.register_buffer("input_max", torch.tensor(float("inf")))',
        "",
        "    def forward(self, x):",
        "        return self.linear(x.clamp(max=self.input_max))",
        "",
        "",
        "model = torch.nn.Sequential()",
        'model.add_module("q_proj", Gemma4ClippableLinear(16))',
        f"model = get_peft_model(model, LoraConfig(target_modules={s.adapter.targets!r}))",
        "print(model(torch.randn(2, 16)).shape)",
    ]
    return "\n".join(lines) + "\n"


def _toy_shared_kv(s: Scenario) -> str:
    """Family C below transformers: layers share a dict through kwargs; hooks copy it."""
    lines = _header(s, ["accelerate"], "toy: two layers sharing a dict kwarg, dispatched without skip_keys.")
    lines += [
        "import tempfile",
        "",
        "import torch",
        "from accelerate import dispatch_model",
        "",
        "",
        "class Layer(torch.nn.Module):",
        "    def __init__(self, source):",
        "        super().__init__()",
        "        self.source, self.proj = source, torch.nn.Linear(8, 8)",
        "",
        "    def forward(self, x, shared_kv_states):",
        "        if self.source:",
        "            shared_kv_states[0] = self.proj(x)",
        "        return x + shared_kv_states[0]",
        "",
        "",
        "class Model(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        "        self.layers = torch.nn.ModuleList([Layer(True), Layer(False)])",
        "",
        "    def forward(self, x):",
        "        shared_kv_states = {}",
        "        for layer in self.layers:",
        "            x = layer(x, shared_kv_states=shared_kv_states)",
        "        return x",
        "",
        "",
        'model = dispatch_model(Model(), device_map={"layers.0": "cpu", "layers.1": "disk"}, offload_dir=tempfile.mkdtemp())',
        "print(model(torch.randn(2, 8)).shape)",
    ]
    return "\n".join(lines) + "\n"


TOY_RENDERERS = {
    "linear4bit_dispatch": _toy_linear4bit_dispatch,
    "clippable_wrapper": _toy_clippable_wrapper,
    "shared_kv": _toy_shared_kv,
}
