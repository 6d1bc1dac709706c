"""Run a script as ``__main__`` and record how it ended, as JSON, for minrepro's runner.

Executed by path (``python _bootstrap.py SCRIPT ARGS...``) under whatever interpreter the user names, so it
uses the standard library only and never imports minrepro. The record goes to the file named by
``MINREPRO_REPORT``; the script itself sees an ordinary ``sys.argv`` and ``sys.path``.

With ``MINREPRO_TRACE=FILE`` the run's placements are recorded as JSON lines. Every ``from_pretrained``: the map
transformers inferred and where each type of weight landed (transformers 5 dispatches only maps that split, so a
budget that sends everything to one device leaves no other record). Every call of accelerate's ``dispatch_model``
(PEFT's redispatch, transformers' own, the script's): who called it, the device map per device, the main device,
how many quantized weights it will put under offload hooks, and, once it returns, the hooks it attached. A pass
then says which branch it exercised. The wrappers only observe: arguments and results pass through unchanged.
A run that fails ends the trace with the torch modules on the failing stack: where each one's weights are, its
accelerate hook, and the devices of the tensors its frame held (a cross-device error's two sides).
"""

import collections
import contextlib
import faulthandler
import functools
import importlib.abc
import importlib.machinery
import json
import os
import runpy
import signal
import sys
import traceback
import weakref


@functools.cache
def _library_tops():
    """Top-level import names that belong to installed distributions (minrepro itself excluded). Cached: the fork
    server computes it once before forking (it reads every installed distribution's metadata), its children
    inherit it."""
    try:
        from importlib.metadata import packages_distributions

        return set(packages_distributions()) - {"minrepro"}
    except Exception:  # a broken metadata dir must not hide the user's failure
        return set()


def _type_name(exc):
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _frames(tb, tops):
    out = []
    for frame, lineno in traceback.walk_tb(tb):
        module = frame.f_globals.get("__name__") or ""
        code = frame.f_code
        out.append(
            {
                "file": code.co_filename,
                "line": lineno,
                "module": module,
                "function": getattr(code, "co_qualname", code.co_name),
                "library": module.split(".")[0] in tops and module != "__main__",
            }
        )
    return out


def _describe(exc, tops):
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable>"
    causes, seen, link = [], {id(exc)}, exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        causes.append(_type_name(link))
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return {
        "type": _type_name(exc),
        "message": message,
        "frames": _frames(exc.__traceback__, tops),
        "causes": causes,
    }


def _write(path, record):
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(record, fh)


# --- placement trace --------------------------------------------------------------------------------

_TRACED_MODULE, _TRACED_NAME = "accelerate.big_modeling", "dispatch_model"
_QUANTIZED = ("Params4bit", "Int8Params")


def _append(path, record):
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


_LOADED_MODELS = []  # weak references to what from_pretrained returned: names for the modules on a failing stack


def _remember(model):
    with contextlib.suppress(TypeError):
        _LOADED_MODELS.append(weakref.ref(model))


def _module_names(roots):
    """id(module) -> its name under the first of `roots` that holds it."""
    names = {}
    for model in roots:
        for name, module in model.named_modules() if model is not None else ():
            names.setdefault(id(module), name or "(root)")
    return names


def _own_hooks(module):
    """accelerate's hooks on this module itself (a SequentialHook holds several). Read from its `__dict__`: a
    PeftModel forwards attribute lookups to its base, whose hook would be counted twice."""
    hook = module.__dict__.get("_hf_hook")
    return list(getattr(hook, "hooks", None) or ([hook] if hook is not None else []))


def _hook_records(module):
    """Where each of a module's hooks moves inputs, and whether it offloads the module's weights."""
    return [
        {
            "type": type(one).__name__,
            "execution_device": _plain(getattr(one, "execution_device", None)),
            "io_same_device": getattr(one, "io_same_device", None),
            "offload": getattr(one, "offload", None),
        }
        for one in _own_hooks(module)
    ]


def _tensor_devices(value, depth=0):
    """The devices of the tensors in a frame's local (tuples, lists and dict values one level down: *args)."""
    if hasattr(value, "device") and hasattr(value, "dtype") and hasattr(value, "shape"):
        return [str(value.device)]
    if depth == 0 and isinstance(value, (tuple, list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return sorted({d for item in list(items)[:16] for d in _tensor_devices(item, 1)})
    return []


_SIDE_TENSORS = ("SCB", "CB")  # bitsandbytes keeps INT8 statistics beside the weight, not as parameters


def _side_tensors(module):
    """Devices of the tensors a quantized module keeps outside its parameters: a weight's `SCB`/`CB`, its 4-bit
    `quant_state.absmax`, the module's `state.SCB`/`state.CB`. A cross-device error can be one of these."""
    found = {}
    for name, param in module.named_parameters(recurse=False):
        for attr in _SIDE_TENSORS:
            if hasattr(tensor := param.__dict__.get(attr), "device"):
                found[f"{name}.{attr}"] = str(tensor.device)
        if hasattr(absmax := getattr(param.__dict__.get("quant_state"), "absmax", None), "device"):
            found[f"{name}.quant_state.absmax"] = str(absmax.device)
    for attr in _SIDE_TENSORS:
        if hasattr(tensor := getattr(module.__dict__.get("state"), attr, None), "device"):
            found[f"state.{attr}"] = str(tensor.device)
    return found


def failure_devices(tb, limit=12):
    """The innermost `limit` frames of the failing stack that run a torch module's method: the module (its name in
    a loaded model, its class), where its own weights are and where those below it are, its hooks, and the devices
    of the tensors the frame held."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    stack = [(frame, lineno, frame.f_locals.get("self")) for frame, lineno in traceback.walk_tb(tb)]
    # a module's method, not Module.__call__'s own two frames (`_wrapped_call_impl`, `_call_impl`) per module call
    stack = [
        (frame, lineno, module)
        for frame, lineno, module in stack
        if isinstance(module, torch.nn.Module) and frame.f_globals.get("__name__") != "torch.nn.modules.module"
    ]
    # names under the loaded models, else under the outermost module on the stack (a model the script built)
    names, frames = _module_names([ref() for ref in _LOADED_MODELS] + [m for _, _, m in stack[:1]]), []
    for frame, lineno, module in stack:
        own = collections.Counter(
            str(t.device) for t in [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        )
        below = collections.Counter(str(p.device) for p in module.parameters())
        tensors = {
            key: devices
            for key, value in frame.f_locals.items()
            if key != "self" and (devices := _tensor_devices(value))
        }
        frames.append(
            {
                "function": getattr(frame.f_code, "co_qualname", frame.f_code.co_name),
                "line": lineno,
                "module": names.get(id(module)),
                "class": type(module).__name__,
                "weights": dict(own),
                "weights_below": dict(below),
                "hooks": _hook_records(module),
                "tensors": tensors,
                "side_tensors": _side_tensors(module),
            }
        )
    return frames[-limit:]


def _main_device(device_map, given):
    # accelerate's own rule (dispatch_model): the first device that is neither cpu nor disk, else cpu
    if given is not None:
        return str(given)
    others = [d for d in device_map.values() if d not in ("cpu", "disk")]
    return str(others[0]) if others else "cpu"


def _placement(model, device_map, main):
    """Counts per device, and the quantized weights under entries that will be offloaded (disk; cpu too when
    the main device is not the cpu): the branch where families A and B live."""
    devices = dict(collections.Counter(str(d) for d in device_map.values()))
    offloaded = [
        name
        for name, device in device_map.items()
        if device == "disk" or (device == "cpu" and main not in ("cpu", "mps"))
    ]
    quantized = 0
    for name, param in model.named_parameters():
        if type(param).__name__ in _QUANTIZED and any(
            not o or name == o or name.startswith(o + ".") for o in offloaded
        ):
            quantized += 1
    return {
        "devices": devices,
        "main_device": main,
        "offloaded_entries": len(offloaded),
        "offloaded_quantized_weights": quantized,
        "device_map": {k: str(v) for k, v in device_map.items()},
    }


def _hooks(model):
    """What dispatch attached: modules whose hook offloads their weights, the quantized ones among them, and
    the execution device of each hooked module."""
    offloading, quantized, execution = 0, 0, {}
    for module in model.modules():
        for one in _own_hooks(module):
            device = getattr(one, "execution_device", None)
            if device is not None:
                execution[str(device)] = execution.get(str(device), 0) + 1
            if getattr(one, "offload", False):
                offloading += 1
                quantized += any(type(p).__name__ in _QUANTIZED for p in module.parameters(recurse=False))
    # what accelerate made the main device, as the root's hook says: the documented rule above is not always what a
    # release does (1.15 takes it from a set: family AD)
    root = _own_hooks(model)
    return {
        "offloading_hooks": offloading,
        "offloading_quantized_modules": quantized,
        "execution_devices": execution,
        "root_execution_device": _plain(getattr(root[0], "execution_device", None)) if root else None,
    }


_RUNNING = [None]  # the script this process runs (set by `prepare`)


def _script_line():
    """The line of the script's own innermost frame on the current stack (None if the script is not on it): which
    statement of the script a load or a dispatch came from, for the scale-down phase's rewrites."""
    # the path the bootstrap ran, not sys.argv[0]: a prepared script sets sys.argv to its user's command line
    script, frame = _RUNNING[0] or os.path.abspath(sys.argv[0]), sys._getframe(1)
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) == script:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _plain(value):
    """A JSON-safe copy of a config value (dtypes and other objects as their str)."""
    return json.loads(json.dumps(value, default=lambda o: sorted(o) if isinstance(o, (set, frozenset)) else str(o)))


def _traced(dispatch, path):
    @functools.wraps(dispatch)
    def dispatch_model(model, device_map, *args, **kwargs):
        frame = sys._getframe(1)
        record = {
            "event": "dispatch_model",
            "caller": f"{frame.f_globals.get('__name__')}:{frame.f_code.co_name}",
            "line": _script_line(),
        }
        try:
            record.update(_placement(model, device_map, _main_device(device_map, kwargs.get("main_device"))))
        except Exception as exc:  # observing must never change what the script does
            record["trace_error"] = repr(exc)
        _append(path, {**record, "status": "started"})
        result = dispatch(model, device_map, *args, **kwargs)
        try:
            _append(path, {**record, "status": "returned", **_hooks(model)})
        except Exception as exc:
            _append(path, {**record, "status": "returned", "trace_error": repr(exc)})
        return result

    dispatch_model.__minrepro_traced__ = True
    return dispatch_model


def _wrap_dispatch(module, path, loaded=False):
    """Wrap dispatch_model in accelerate.big_modeling; if it was imported before the trace, also rebind every module
    attribute that holds it (not while importing: a lazy module's getattr would import in a circle)."""
    original = getattr(module, _TRACED_NAME)
    if getattr(original, "__minrepro_traced__", False):
        return
    wrapper = _traced(original, path)
    for other in [module, *list(sys.modules.values())] if loaded else [module]:
        if getattr(other, _TRACED_NAME, None) is original:
            setattr(other, _TRACED_NAME, wrapper)


def _loaded_placement(model):
    """Where a loaded model's weights are, by parameter type and device ("Int8Params@cuda:0": 12), and the map
    transformers inferred: whether a split happened at all (a budget can send everything to one device)."""
    where = collections.Counter(f"{type(p).__name__}@{p.device}" for p in model.parameters())
    device_map = {k: str(v) for k, v in (getattr(model, "hf_device_map", None) or {}).items()}
    return {
        "devices": dict(collections.Counter(device_map.values())),
        "device_map": device_map,
        "parameters": dict(where),
    }


# the bootstrap imports as little as it can (no dataclasses): what a wrapper observes comes as plain arguments
def _observe_classmethod(owner, name, path, event, describe, before=False):  # noqa: PLR0913
    """Wrap `owner.name` (a classmethod) so that each call appends `describe(cls, result, args, kwargs)` as an
    `event` record. Observing only: the result passes through, and a failure to describe is a `trace_error`.
    `before`: described from the arguments alone (result None), when the call starts: a call that fails inside
    (PEFT's redispatch) is recorded too."""
    original = owner.__dict__[name].__func__
    if getattr(original, "__minrepro_traced__", False):
        return

    def described(cls, result, args, kwargs):
        try:
            return describe(cls, result, args, kwargs)
        except Exception as exc:  # observing must never change what the script does
            return {"trace_error": repr(exc)}

    @functools.wraps(original)
    def observed(cls, *args, **kwargs):
        line = _script_line()
        if before:
            _append(path, {"event": event, "status": "started", "line": line, **described(cls, None, args, kwargs)})
            return original(cls, *args, **kwargs)
        result = original(cls, *args, **kwargs)
        _append(path, {"event": event, "status": "returned", "line": line, **described(cls, result, args, kwargs)})
        return result

    observed.__minrepro_traced__ = True
    setattr(owner, name, classmethod(observed))


def _wrap_from_pretrained(module, path, loaded=False):
    """Record what `PreTrainedModel.from_pretrained` returned (transformers 5 dispatches only maps that split), and
    what it was asked to load when it starts (`_record_load_starts`)."""
    _observe_classmethod(
        module.PreTrainedModel,
        "from_pretrained",
        path,
        "from_pretrained",
        lambda cls, model, args, kwargs: (
            _remember(model)
            or {
                "caller": cls.__name__,
                **_loaded_placement(model),
                **_model_record(model, args, kwargs),
                **_generation_record(model),
            }
        ),
    )
    _record_load_starts(module, path)


def _model_record(model, args, kwargs):
    """What a tiny twin of a loaded model needs: its class, its config next to the class's defaults (what differs
    carries the structure), the checkpoint it came from."""
    record = {"model_class": type(model).__name__}
    try:  # apart from the placement: a stand-in model without a config still says where its weights went
        config = model.config
        checkpoint = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        record.update(
            {
                "model_type": config.model_type,
                "config": _plain(config.to_dict()),
                "config_defaults": _plain(_config_defaults(config)),
                "checkpoint": os.fspath(checkpoint) if isinstance(checkpoint, (str, os.PathLike)) else None,
                "parameters_total": sum(p.numel() for p in model.parameters()),
            }
        )
    except Exception as exc:
        record["model_trace_error"] = repr(exc)
    return record


def _config_defaults(config):
    """The config class's defaults, and for each nested config the class leaves unset (Gemma 4's vision and audio
    configs default to None) that config's own class defaults, marked UNSET_MARK: diffed against None, the E4B twin
    repeated every field of both towers (id2label included) in one line of its output."""
    defaults = type(config)().to_dict()
    for key, value in vars(config).items():
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and not isinstance(defaults.get(key), dict):
            try:
                defaults[key] = {**type(value)().to_dict(), UNSET_MARK: True}
            except Exception:  # a config class that cannot be built bare: diffed against None, as before
                pass
    return defaults


UNSET_MARK = "__minrepro_unset__"


def _adapter_record(cls, _result, args, kwargs):
    """What a twin adapter needs: the adapter's config (read as PeftModel.from_pretrained reads it, before the call:
    the seeds' failure is inside it) and its class's defaults."""
    model_id = args[1] if len(args) > 1 else kwargs.get("model_id")
    config = args[4] if len(args) > 4 else kwargs.get("config")
    if config is None:
        peft_config = sys.modules["peft"].PeftConfig
        mapping = sys.modules[cls.__module__].PEFT_TYPE_TO_CONFIG_MAPPING
        config = mapping[peft_config._get_peft_type(model_id)].from_pretrained(model_id)
    return {
        "adapter": os.fspath(model_id) if isinstance(model_id, (str, os.PathLike)) else None,
        "peft_config": _plain(config.to_dict()),
        "peft_defaults": _plain(type(config)().to_dict()),
        "config_class": type(config).__name__,
    }


def _wrap_peft_from_pretrained(module, path, loaded=False):
    """Record what `PeftModel.from_pretrained` loaded: the adapter's config (for a twin adapter) and the script line."""
    _observe_classmethod(
        module.PeftModel, "from_pretrained", path, "peft_from_pretrained", _adapter_record, before=True
    )


_TRACED = {
    _TRACED_MODULE: _wrap_dispatch,
    "transformers.modeling_utils": _wrap_from_pretrained,
    "peft.peft_model": _wrap_peft_from_pretrained,
}


# --- token ids, tokenizers, loads that fail: what a twin with a small vocabulary needs -------------------------
# The scale-down shrinks every vocabulary of a twin together with the ids that index it. So the trace records the
# ids the run looked up in each embedding table (a table's size beside them: a position table is not a vocabulary),
# the prompts given to `generate` with the ids it falls back on (its own tokens are outputs, not inputs), each
# tokenizer call's result (the twin gets it as a literal and needs no tokenizer files) with each tokenizer's
# special ids, and each model load's config when the load starts (a load that fails, or reads weights that are not
# there, still has a twin: a Hub id needs its config files only).

_ID_LIMIT = 4096  # more distinct ids than this (a data set) and the vocabularies stay as they are
_IDS = {}  # table size (None: a prompt, a special id) -> the ids recorded
_QUIET = [0]  # > 0 inside generate: its forward passes embed its own outputs
_TOKENIZING = [0]  # > 0 inside a tokenizer call: only the outermost one is the script's
_SPECIAL_IDS = (
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "unk_token_id",
    "sep_token_id",
    "cls_token_id",
    "mask_token_id",
    "decoder_start_token_id",
)


def _note_ids(path, table, ids, source):
    """Append the ids not recorded yet for this table (an overflow once, past _ID_LIMIT)."""
    seen = _IDS.setdefault(table, set())
    if len(seen) > _ID_LIMIT:
        return
    new = {i for i in ids if type(i) is int and i >= 0} - seen
    if not new:
        return
    seen |= new
    record = {"event": "token_ids", "table": table, "source": source, "ids": sorted(new)}
    _append(path, record if len(seen) <= _ID_LIMIT else {"event": "token_ids", "table": table, "overflow": True})


def _tensor_ids(value):
    """The distinct ids of an integer tensor (none for anything else, or for a tensor with no data)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor) or value.device.type == "meta":
        return []
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        return []
    return torch.unique(value.detach()).tolist()


def _flat_ints(value):
    return [i for item in value for i in _flat_ints(item)] if isinstance(value, (list, tuple)) else [value]


def _wrap_embedding(module, path, loaded=False):
    """Record the ids each `nn.Embedding` looks up, with its table's size (subclasses call this forward too)."""
    embedding = module.Embedding
    original = embedding.forward
    if getattr(original, "__minrepro_traced__", False):
        return

    @functools.wraps(original)
    def forward(self, input, *args, **kwargs):
        if not _QUIET[0]:
            with contextlib.suppress(Exception):  # observing must never change what the script does
                _note_ids(path, self.num_embeddings, _tensor_ids(input), "embedding")
        return original(self, input, *args, **kwargs)

    forward.__minrepro_traced__ = True
    embedding.forward = forward


def _generation_ids(generation_config, kwargs):
    """The special ids generate falls back on (the config's, or the call's own), as plain ints."""
    found = []
    for name in _SPECIAL_IDS:
        value = kwargs.get(name, getattr(generation_config, name, None))
        found += [i for i in _flat_ints(value) if type(i) is int]
    return found


def _wrap_generate(module, path, loaded=False):
    """Record generate's prompt and the ids it falls back on; its own forward passes are not recorded."""
    mixin = module.GenerationMixin
    original = mixin.generate
    if getattr(original, "__minrepro_traced__", False):
        return

    @functools.wraps(original)
    def generate(self, *args, **kwargs):
        if not _QUIET[0]:
            with contextlib.suppress(Exception):  # observing must never change what the script does
                prompt = kwargs.get("input_ids", kwargs.get("inputs", args[0] if args else None))
                _note_ids(path, None, _tensor_ids(prompt), "generate")
                config = kwargs.get("generation_config") or getattr(self, "generation_config", None)
                _note_ids(path, None, _generation_ids(config, kwargs), "generate")
        _QUIET[0] += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _QUIET[0] -= 1

    generate.__minrepro_traced__ = True
    mixin.generate = generate


def _data(value, depth=0):
    """A tokenizer's result as plain data the reducer can write back as a literal (`BatchEncoding`, a dict, an integer
    tensor, a list of ints, a string), or None for anything else (floats: pixel values) or anything too large."""
    torch = sys.modules.get("torch")
    if isinstance(value, str):
        return {"type": "str", "value": value} if len(value) <= 8 * _ID_LIMIT else None
    if torch is not None and isinstance(value, torch.Tensor):
        if (
            value.dtype.is_floating_point
            or value.dtype.is_complex
            or value.numel() > _ID_LIMIT
            or value.device.type == "meta"
        ):
            return None
        return {"type": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "values": value.tolist()}
    if isinstance(value, (list, tuple)):
        flat = _flat_ints(value)
        plain = all(type(i) is int for i in flat) and len(flat) <= _ID_LIMIT
        return {"type": "list", "values": json.loads(json.dumps(value))} if plain else None
    data = getattr(value, "data", None) if type(value).__name__ == "BatchEncoding" else value
    if type(data) is dict and depth == 0:
        items = {k: _data(v, 1) for k, v in data.items()}
        if all(type(k) is str for k in items) and None not in items.values():
            return {"type": "BatchEncoding" if data is not value else "dict", "data": items}
    return None


def _tokenizing(original, method, path):
    @functools.wraps(original)
    def call(self, *args, **kwargs):
        line = _script_line()
        _TOKENIZING[0] += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            _TOKENIZING[0] -= 1
        if not _TOKENIZING[0]:
            try:
                _append(path, {"event": "tokenized", "method": method, "line": line, "result": _data(result)})
            except Exception as exc:  # observing must never change what the script does
                _append(path, {"event": "tokenized", "method": method, "line": line, "trace_error": repr(exc)})
        return result

    call.__minrepro_traced__ = True
    return call


def _tokenizer_record(cls, tokenizer, args, kwargs):
    special = {name: getattr(tokenizer, name, None) for name in _SPECIAL_IDS}
    return {
        "tokenizer_class": type(tokenizer).__name__,
        "special_ids": {k: v for k, v in special.items() if type(v) is int},
    }


def _wrap_tokenizer(module, path, loaded=False):
    """Record each tokenizer call's result (the outermost: `apply_chat_template` calls the tokenizer itself) and each
    tokenizer load's special ids."""
    base = module.PreTrainedTokenizerBase
    for method in ("__call__", "encode", "apply_chat_template"):
        original = base.__dict__.get(method)
        if original is not None and not getattr(original, "__minrepro_traced__", False):
            setattr(base, method, _tokenizing(original, method, path))
    if "from_pretrained" in base.__dict__:
        _observe_classmethod(base, "from_pretrained", path, "tokenizer", _tokenizer_record)


_HUB_KWARGS = (
    "cache_dir",
    "revision",
    "subfolder",
    "token",
    "local_files_only",
    "trust_remote_code",
    "force_download",
    "proxies",
)


def _load_start_record(cls, args, kwargs):
    """A model load as it starts: the class and the config the checkpoint (a directory or a Hub id) names."""
    checkpoint = args[0] if args else kwargs.get("pretrained_model_name_or_path")
    config = kwargs.get("config")
    if not (hasattr(config, "to_dict") and hasattr(config, "model_type")):
        config = cls.config_class.from_pretrained(checkpoint, **{k: kwargs[k] for k in _HUB_KWARGS if k in kwargs})
    return {
        "model_class": cls.__name__,
        "model_type": config.model_type,
        "config": _plain(config.to_dict()),
        "config_defaults": _plain(_config_defaults(config)),
        "checkpoint": os.fspath(checkpoint) if isinstance(checkpoint, (str, os.PathLike)) else None,
    }


def _record_load_starts(module, path):
    """Wrap the (already observed) `PreTrainedModel.from_pretrained` once more: a record when the load starts."""
    owner = module.PreTrainedModel
    inner = owner.__dict__["from_pretrained"].__func__
    if getattr(inner, "__minrepro_started__", False):
        return

    @functools.wraps(inner)
    def started(cls, *args, **kwargs):
        record = {"event": "from_pretrained", "status": "started", "line": _script_line()}
        try:
            record.update(_load_start_record(cls, args, kwargs))
        except Exception as exc:  # observing must never change what the script does
            record["model_trace_error"] = repr(exc)
        _append(path, record)
        return inner(cls, *args, **kwargs)

    started.__minrepro_started__ = started.__minrepro_traced__ = True
    owner.from_pretrained = classmethod(started)


def _generation_record(model):
    """The special ids of a loaded model's generation config (what generate falls back on)."""
    config = getattr(model, "generation_config", None)
    ids = {name: getattr(config, name, None) for name in _SPECIAL_IDS}
    ids = {k: v for k, v in ids.items() if v is not None and all(type(i) is int for i in _flat_ints(v))}
    return {"generation_ids": ids} if ids else {}


_TRACED.update(
    {
        "torch.nn.modules.sparse": _wrap_embedding,
        "transformers.generation.utils": _wrap_generate,
        "transformers.tokenization_utils_base": _wrap_tokenizer,
    }
)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `after[name](module)` as each named module finishes importing, before anyone binds or reads it."""

    def __init__(self, after):
        self.after = after

    def find_spec(self, name, search_path, target=None):
        if name not in self.after:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, search_path)
        if spec is None or spec.loader is None:
            return spec
        run_module, then = spec.loader.exec_module, self.after[name]

        def exec_module(module):
            run_module(module)
            then(module)

        spec.loader.exec_module = exec_module
        return spec


def install_trace(path):
    for name, wrap in _TRACED.items():
        if name in sys.modules:
            wrap(sys.modules[name], path, loaded=True)
    sys.meta_path.insert(0, _AfterImport({name: functools.partial(wrap, path=path) for name, wrap in _TRACED.items()}))


# --- profile of the original (for the reducer's static passes and prefix snapshots) ------------------

_LITERALS = (int, float, str, bool, type(None))
_MAX_TEXT = 4000  # characters: a longer text (a whole data file read) is not written into a script as a literal


def _literal_repr(value, depth=0):
    """A source expression for a plain value, or None: literals, and small lists, tuples and str-keyed dicts of
    them nested at most three deep (a config section: `{'r': 8, 'target_modules': ['q_proj', 'v_proj']}`)."""
    # the exact types: a subclass's repr (a str-valued enum: `<TaskType.CAUSAL_LM: 'CAUSAL_LM'>`) is no literal
    if type(value) is str and len(value) > _MAX_TEXT:
        return None
    if type(value) in _LITERALS and not (isinstance(value, float) and value != value):
        return repr(value)
    if type(value) not in (tuple, list, dict) or depth >= 3 or len(value) > 16:
        return None
    items = value.items() if type(value) is dict else enumerate(value)
    parts = [(k, _literal_repr(v, depth + 1)) for k, v in items]
    if any(p is None for _, p in parts) or (type(value) is dict and any(type(k) is not str for k, _ in parts)):
        return None
    if type(value) is dict:
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in parts) + "}"
    text = ", ".join(p for _, p in parts)
    return f"[{text}]" if type(value) is list else f"({text}{',' if len(parts) == 1 else ''})"


_GETTERS = ("get", "getint", "getfloat", "getboolean")  # dict.get and configparser's section getters
# Calls that read a file's data: what they returned becomes a literal where the failure does not need the file
# (`yaml.safe_load(fh)`, `json.load(open(args.config))`, `Path(p).read_text()`). A call that returns no plain data
# (`torch.load`'s tensors) records nothing. The reducer names the same calls inputs (its own `FILE_READERS`, in
# reducers/passes/profiled.py; a test holds the two the same).
FILE_READERS = ("load", "loads", "safe_load", "full_load", "read", "read_text", "readlines")


def read_key(node):
    """A config read as source, or None: `name.attr`, `name['key']...` (constant str keys, on a name or a
    `name.attr`), or a getter called with constants on one of those (`m.getint('layers')`, `cfg['q'].get('type')`),
    a call that reads a file's data (FILE_READERS), or `sys.argv[1]`.

    The one rule for what a config read is: the profile here records these reads' values, keyed by the read's source,
    and the reducer's `resolve_recorded_values` writes back each read whose source is a recorded key (it never imports
    the harness). Standard library only: this file also runs in the target env, without minrepro."""
    import ast

    if isinstance(node, ast.Call):
        f, args = node.func, node.args
        constant_args = (
            0 < len(args) <= 2
            and not node.keywords
            and all(isinstance(a, ast.Constant) for a in args)
            and type(args[0].value) is str
        )
        on_a_read = isinstance(f, ast.Attribute) and (isinstance(f.value, ast.Name) or read_key(f.value) is not None)
        if constant_args and on_a_read and f.attr in _GETTERS:
            return ast.unparse(node)
        reader = isinstance(f, (ast.Attribute, ast.Name)) and getattr(f, "attr", getattr(f, "id", "")) in FILE_READERS
        return ast.unparse(node) if reader else None
    if not isinstance(node, (ast.Attribute, ast.Subscript)) or not isinstance(node.ctx, ast.Load):
        return None
    if (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value) == "sys.argv"
        and isinstance(node.slice, ast.Constant)
        and type(node.slice.value) is int
    ):
        return ast.unparse(node)  # an argument read straight from the command line
    inner = node
    while isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Constant) and type(inner.slice.value) is str:
        inner = inner.value
    if isinstance(inner, ast.Attribute):
        inner = inner.value
    elif inner is node:
        return None
    return ast.unparse(node) if isinstance(inner, ast.Name) and inner is not node else None


class _Recorder(__import__("ast").NodeTransformer):
    """Config reads (`args.steps`, `cfg['eval']['seed']`, `m.getint('layers')`) become `__minrepro_seen__(key, read)`:
    the value each read had. The object a store writes into is left alone (`cfg['a']['b'] = 1` reads `cfg['a']`)."""

    def _visit(self, node):
        import ast

        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            if isinstance(node, ast.Subscript):
                node.slice = self.visit(node.slice)
            return node
        key = read_key(node)
        self.generic_visit(node)
        if key is None:
            return node
        call = ast.Call(ast.Name("__minrepro_seen__", ast.Load()), [ast.Constant(key), node], [])
        return ast.copy_location(call, node)

    visit_Attribute = visit_Subscript = visit_Call = _visit


def run_profiled(script, out_path):
    """Run the script as __main__ with its module-level statements timed (by line), the lines of its own functions
    that ran, and the values of its `name.attr` reads recorded; write them to out_path. Raises what the script
    raises."""
    import ast
    import time

    with open(script, encoding="utf-8") as fh:
        source = fh.read()
    tree = _Recorder().visit(ast.parse(source))
    code = compile(ast.fix_missing_locations(tree), script, "exec")
    seen, timing, last = {}, {}, [None, time.monotonic()]
    in_functions = set()  # lines of the script's own functions and methods that ran (this thread's)

    def note(key, value):
        text = _literal_repr(value)
        seen.setdefault(key, set()).add(text)
        return value

    def function_line(frame, event, arg):
        if event == "line":
            in_functions.add(frame.f_lineno)
        return function_line

    def tracer(frame, event, arg):
        if frame.f_code is not code:  # the script's own functions: which lines ran; the libraries' calls untraced
            return function_line if frame.f_code.co_filename == script else None
        if event == "line":
            now = time.monotonic()
            if last[0] is not None:
                timing[last[0]] = timing.get(last[0], 0.0) + now - last[1]
            last[0], last[1] = frame.f_lineno, now
        return tracer

    globals_ = {"__name__": "__main__", "__file__": script, "__builtins__": __builtins__, "__minrepro_seen__": note}

    def dump():
        if last[0] is not None:
            timing[last[0]] = timing.get(last[0], 0.0) + time.monotonic() - last[1]
        values = {k: next(iter(v)) for k, v in seen.items() if len(v) == 1 and None not in v}
        with open(out_path, "w", encoding="utf-8") as fh:
            json.dump({"values": values, "line_seconds": timing, "function_lines": sorted(in_functions)}, fh)

    sys.settrace(tracer)
    try:
        exec(code, globals_)
    finally:
        sys.settrace(None)
        dump()


# --- an absent CPU feature, emulated -------------------------------------------------------------------
# `MINREPRO_EMULATE_ABSENT=avx512_bf16` runs the script as the libraries run on a CPU without that feature, so a
# patch's no-harm proof can cover such a CPU here. Only where a library asks in one place: bitsandbytes decides on
# AVX512-BF16 by its native `has_avx512bf16_cpu()`, read when its CPU backend registers kernels and when a
# Linear4bit is built; it must answer False before `bitsandbytes.cextension` is used. A cold run only: a fork
# server that preloaded bitsandbytes has already asked.

_EMULATED = []  # the features whose emulation took effect in this run (reported: a no-harm check must know)


def _no_avx512_bf16(module):
    module.lib.has_avx512bf16_cpu = lambda: False
    _EMULATED.append("avx512_bf16")


_EMULATIONS = {"avx512_bf16": ("bitsandbytes.cextension", _no_avx512_bf16)}


def emulate_absent(flags):
    for flag in filter(None, flags.split(",")):
        if flag not in _EMULATIONS:
            raise SystemExit(f"minrepro: cannot emulate a CPU without {flag} (known: {', '.join(_EMULATIONS)})")
        name, then = _EMULATIONS[flag]
        if name in sys.modules:  # a warm executor preloaded it: it has asked already, the emulation would be a no-op
            raise SystemExit(
                f"minrepro: cannot emulate a CPU without {flag}: {name} was imported before the script (run it cold)"
            )
        sys.meta_path.insert(0, _AfterImport({name: then}))


def prepare(script, args, path0=None):
    """The process as a script expects it: argv, its directory first on sys.path, stacks on crashes and on the
    runner's SIGUSR1, and the placement trace when asked for."""
    sys.argv = [script, *args]
    _RUNNING[0] = os.path.abspath(script)
    sys.path.insert(0, path0 or os.path.dirname(os.path.abspath(script)))
    faulthandler.enable()  # segfaults and aborts leave a Python stack on stderr
    emulate_absent(os.environ.get("MINREPRO_EMULATE_ABSENT", ""))
    if os.environ.get("MINREPRO_TRACE"):
        install_trace(os.environ["MINREPRO_TRACE"])
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=False)  # the runner asks for a stack on timeout


def execute(script, args, report, path0=None):
    """Run ``script`` as __main__ with ``args``; record how it ended in ``report``; return the exit code.

    Also used in-process by the fork server's children and the warm workers."""
    prepare(script, args, path0)
    if os.environ.get("MINREPRO_PROFILE"):
        return guarded(lambda: run_profiled(script, os.environ["MINREPRO_PROFILE"]), report)
    return guarded(lambda: runpy.run_path(script, run_name="__main__"), report)


def split_module(script, cut):
    """The script's code as (first `cut` top-level statements, the rest), compiled with their own line numbers
    and the whole module's __future__ flags: a prefix snapshot runs the first, each candidate the second."""
    import __future__
    import ast

    with open(script, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), script)
    mask = 0
    for name in __future__.all_feature_names:
        mask |= getattr(__future__, name).compiler_flag
    flags = compile(tree, script, "exec").co_flags & mask
    head, tail = ast.Module(tree.body[:cut], []), ast.Module(tree.body[cut:], [])
    return (
        compile(head, script, "exec", flags=flags, dont_inherit=True),
        compile(tail, script, "exec", flags=flags, dont_inherit=True),
    )


def _loaded():
    """Top-level names of installed distributions that the run had imported: what a handed-over script needs
    pinned, including what it only uses indirectly (BitsAndBytesConfig needs bitsandbytes)."""
    return sorted({name.split(".")[0] for name in list(sys.modules)} & _library_tops())


def _modules():
    """Every module of an installed distribution the run had imported, in import order: what a fork server
    preloads so that a candidate does not pay again for what the libraries import lazily (transformers imports
    bitsandbytes at the first quantized load: most of a tiny script's run, in every forked child)."""
    tops = _library_tops()
    return [name for name in list(sys.modules) if name.split(".")[0] in tops]


def _peak_memory():
    """Peak memory of this process in MiB: resident (RAM) and, where the run used CUDA, what torch reserved on the
    GPU. How many such runs fit side by side on this machine is read from these."""
    out = {}
    try:
        import resource

        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            out["peak_gpu_mb"] = (
                max(torch.cuda.max_memory_reserved(i) for i in range(torch.cuda.device_count())) / 2**20
            )
    except Exception:  # observing must never change how the run ended
        pass
    return out


def _ended(record):
    return {**record, "loaded": _loaded(), "modules": _modules(), "emulated_absent": _EMULATED, **_peak_memory()}


def guarded(run, report):
    """Call ``run``; record how it ended in ``report`` as the runner reads it; return the exit code."""
    try:
        run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        _write(report, _ended({"exit": code, "system_exit": True}))
        return code
    except BaseException as exc:
        _write(report, _ended({"exception": _describe(exc, _library_tops())}))
        traceback.print_exc()
        if os.environ.get("MINREPRO_TRACE"):
            try:
                _append(
                    os.environ["MINREPRO_TRACE"], {"event": "failure", "modules": failure_devices(exc.__traceback__)}
                )
            except Exception as trace_exc:  # observing must never change how the run ended
                _append(os.environ["MINREPRO_TRACE"], {"event": "failure", "trace_error": repr(trace_exc)})
        return 1
    _write(report, _ended({"exit": 0}))
    return 0


def main():
    report = os.environ.pop("MINREPRO_REPORT", None)
    sys.path.pop(0)  # this file's directory: the script's own directory goes first instead
    code = execute(sys.argv[1], sys.argv[2:], report, os.environ.pop("MINREPRO_PATH0", None))
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        os._exit(code)  # skip atexit/finalizers of a possibly corrupted library state


if __name__ == "__main__":
    main()
