"""Signature normalization and identity, as properties."""

from __future__ import annotations

import string

from hypothesis import example, given, strategies as st

from minrepro.harness.signature import (
    Frame,
    Signature,
    frames_from_text,
    module_of_path,
    normalize_message,
    parse_traceback,
    raiser_of_records,
)

numbers = st.one_of(
    st.integers(min_value=0, max_value=10**12).map(str),
    st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda f: f"{f:.4g}"),
)
hexes = st.integers(min_value=1, max_value=2**64).map(hex)
paths = st.lists(
    st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=8), min_size=1, max_size=5
).map(lambda parts: "/" + "/".join(parts) + ".py")
shapes = st.lists(st.integers(min_value=1, max_value=4096), min_size=2, max_size=4)
words = st.text(string.ascii_letters + " _'", max_size=30)


@given(st.text())
@example("0/=")  # a number before "/" used to turn into a path on the second pass
def test_normalization_is_idempotent(text):
    once = normalize_message(text)
    assert normalize_message(once) == once


TEMPLATES = [
    "Tried to allocate {n} GiB (GPU {n2}; {n3} MiB free) at {h}",
    "KeyError: {n}",
    "Trying to set a tensor of shape torch.Size({s}) in weight (which has shape torch.Size({s2}))",
    "cannot open {p}: object at {h} has size {n}",
    "mat1 and mat2 shapes cannot be multiplied ({x}x{y} and {y}x{x})",
    "expected {s} got tensor([{n}, {n2}], device='cuda:{n3}')",
]


@given(st.sampled_from(TEMPLATES), st.data())
def test_run_specific_values_do_not_change_the_normalized_message(template, data):
    def fill():
        return template.format(
            n=data.draw(numbers),
            n2=data.draw(numbers),
            n3=data.draw(numbers),
            h=data.draw(hexes),
            p=data.draw(paths),
            s=data.draw(shapes),
            s2=data.draw(shapes),
            x=data.draw(st.integers(1, 999)),
            y=data.draw(st.integers(1, 999)),
        )

    assert normalize_message(fill()) == normalize_message(fill())


@given(words)
def test_identifiers_with_digits_are_kept(word):
    # "Params4bit", "nf4", "cuda130" name things; only free-standing numbers are abstracted.
    message = f"Params4bit.__new__() got an unexpected keyword argument '{word}' for nf4"
    assert "Params4bit" in normalize_message(message) and "nf4" in normalize_message(message)


def _traceback(frames: list[tuple[str, int, str]], line: str) -> str:
    body = "".join(f'  File "{path}", line {lineno}, in {func}\n    code()\n' for path, lineno, func in frames)
    return f"Traceback (most recent call last):\n{body}{line}\n"


LIB = "/venv/lib/python3.11/site-packages"


@given(
    st.lists(st.integers(1, 10_000), min_size=3, max_size=3),
    st.lists(st.integers(1, 10_000), min_size=3, max_size=3),
    numbers,
    numbers,
)
def test_two_runs_of_one_bug_compare_equal(lines_a, lines_b, value_a, value_b):
    def run(lines, value):
        frames = [
            ("/home/u/job.py", lines[0], "<module>"),
            (f"{LIB}/accelerate/hooks.py", lines[1], "new_forward"),
            (f"{LIB}/bitsandbytes/functional.py", lines[2], "as_dict"),
        ]
        return parse_traceback(_traceback(frames, f"RuntimeError: offset {value} is on meta"))

    assert run(lines_a, value_a) == run(lines_b, value_b)


@given(
    st.one_of(st.integers().map(str), st.text(string.ascii_letters + "_.", max_size=30).map(repr)),
    st.one_of(st.integers().map(str), st.text(string.ascii_letters + "_.", max_size=30).map(repr)),
)
def test_a_missing_key_is_data_not_identity(key_a, key_b):
    # one shared-KV lookup bug: `KeyError: 22` on transformers 5.7, `KeyError: 'full_attention'` on 5.13
    def run(key):
        frames = [
            ("/home/u/job.py", 3, "<module>"),
            (f"{LIB}/transformers/models/gemma4/modeling_gemma4.py", 1258, "forward"),
        ]
        return parse_traceback(_traceback(frames, f"KeyError: {key}"))

    assert run(key_a) == run(key_b)
    other = parse_traceback(
        _traceback([(f"{LIB}/transformers/models/gemma4/modeling_gemma4.py", 1258, "forward")], f"IndexError: {key_a}")
    )
    assert other != run(key_a)


def test_a_standard_library_container_raises_for_its_library_caller():
    # transformers 5.8+ looks shared KV states up in a collections mapping: the raise moved into the stdlib
    gemma = (f"{LIB}/transformers/models/gemma4/modeling_gemma4.py", 1258, "forward")
    plain = parse_traceback(_traceback([gemma], "KeyError: 22"))
    mapping = parse_traceback(
        _traceback(
            [gemma, ("/usr/lib/python3.11/collections/__init__.py", 1126, "__getitem__")], "KeyError: 'full_attention'"
        )
    )
    assert plain == mapping and plain.raised_by == "library"
    records = [
        {"module": "transformers.models.gemma4.modeling_gemma4", "library": True},
        {"module": "collections", "library": False},
    ]
    assert raiser_of_records(records) == "library"
    assert raiser_of_records([{"module": "__main__"}, {"module": "json.decoder"}]) == "script"


@given(st.text(string.ascii_letters + " ", min_size=1, max_size=40))
def test_same_message_from_user_code_differs_from_library(message):
    user = parse_traceback(_traceback([("/home/u/job.py", 3, "<module>")], f"ValueError: {message}"))
    library = parse_traceback(
        _traceback(
            [("/home/u/job.py", 3, "<module>"), (f"{LIB}/peft/tuners/lora/model.py", 9, "_create_new_module")],
            f"ValueError: {message}",
        )
    )
    assert user.message == library.message and user.type == library.type
    assert user != library
    assert user.origin() != library.origin()


@given(st.integers(1, 6))
def test_recursion_depth_does_not_change_frames(depth):
    frames = [(f"{LIB}/accelerate/hooks.py", 600 + i, "attach_align_device_hook_on_blocks") for i in range(depth)]
    text = _traceback([*frames, (f"{LIB}/torch/nn/modules/module.py", 2260, "state_dict")], "RuntimeError: x")
    assert parse_traceback(text).frames == (
        Frame("accelerate", "accelerate.hooks", "attach_align_device_hook_on_blocks"),
        Frame("torch", "torch.nn.modules.module", "state_dict"),
    )


def test_owner_skips_torch_plumbing():
    sig = Signature(
        "exception",
        "RuntimeError",
        "m",
        (
            Frame("accelerate", "accelerate.hooks", "attach_execution_device_hook"),
            Frame("bitsandbytes", "bitsandbytes.functional", "QuantState.as_dict"),
            Frame("torch", "torch._meta_registrations", "meta_local_scalar_dense"),
        ),
    )
    assert str(sig.owner) == "bitsandbytes.functional:QuantState.as_dict"
    assert sig.coarse().frames == (Frame("bitsandbytes", "bitsandbytes.functional", "as_dict"),)


def test_module_of_path_understands_installs_and_pasted_reports():
    assert module_of_path(r"E:\env\Lib\site-packages\peft\peft_model.py") == ("peft", "peft.peft_model")
    assert module_of_path("/usr/lib/python3/dist-packages/torch/nn/__init__.py") == ("torch", "torch.nn")
    assert module_of_path(r"...accelerate\hooks.py") == ("accelerate", "accelerate.hooks")
    assert module_of_path(".../accelerate/utils/modeling.py") == ("accelerate", "accelerate.utils.modeling")
    assert module_of_path("/home/me/job.py") is None


def test_faulthandler_dump_is_read_most_recent_first():
    dump = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
        f'  File "{LIB}/bitsandbytes/functional.py", line 10 in dequantize_4bit\n'
        f'  File "{LIB}/peft/tuners/lora/bnb.py", line 20 in forward\n'
        '  File "/home/me/job.py", line 3 in <module>\n'
    )
    assert [f.function for f in frames_from_text(dump, most_recent_first=True)] == ["forward", "dequantize_4bit"]


def test_signature_round_trips_through_dict():
    sig = Signature("oom", "torch.OutOfMemoryError", "CUDA out of memory", (Frame("torch", "torch.x", "f"),), ("E",))
    assert Signature.from_dict(sig.to_dict()) == sig


def test_a_no_grad_decorator_around_the_scripts_function_is_not_part_of_the_failure():
    """`@torch.no_grad()` calls the script's `main` through torch's `decorate_context`: with or without it, the
    failure below is the same one, so a reduction may drop the decorator."""
    inner = [(f"{LIB}/accelerate/hooks.py", 600, "attach_execution_device_hook")]
    plain = [("/home/u/job.py", 30, "<module>"), ("/home/u/job.py", 20, "main"), *inner]
    decorated = [plain[0], (f"{LIB}/torch/utils/_contextlib.py", 120, "decorate_context"), *plain[1:]]
    line = "RuntimeError: Tensor.item() cannot be called on meta tensors"
    assert parse_traceback(_traceback(decorated, line)) == parse_traceback(_traceback(plain, line))
    assert parse_traceback(_traceback(decorated, line)).frames == (
        Frame("accelerate", "accelerate.hooks", "attach_execution_device_hook"),
    )
