"""The isolated runner, on small scripts that need no heavy libraries."""

from __future__ import annotations

import sys
import time

import pytest

from minrepro.errors import MinreproError
from minrepro.harness.runner import run_script


def test_passing_script_has_no_signature(write_script):
    result = run_script(write_script("print('fine')\n"), timeout=30)
    assert result.returncode == 0 and result.signature is None and "fine" in result.stdout


def test_exception_from_user_code(write_script):
    result = run_script(write_script("raise KeyError(13)\n"), timeout=30)
    assert result.signature.kind == "exception"
    assert result.signature.headline == "KeyError: <key>"  # a missing key is data
    assert result.signature.frames == ()
    assert result.raw_headline == "KeyError: 13"


def test_library_frames_are_recorded_and_distinguish_user_raises(write_script):
    # `packaging` is an installed distribution: its frames count as library frames.
    through_library = run_script(write_script("from packaging.version import Version\nVersion('x y')\n", "a.py"))
    from_user = run_script(
        write_script(
            "from packaging.version import InvalidVersion\nraise InvalidVersion(\"Invalid version: 'x y'\")\n", "b.py"
        )
    )
    assert through_library.signature.type == from_user.signature.type == "packaging.version.InvalidVersion"
    assert through_library.signature.message == from_user.signature.message
    assert through_library.signature.frames and not from_user.signature.frames
    assert through_library.signature != from_user.signature
    assert str(through_library.signature.owner).startswith("packaging.version:")


def test_line_numbers_and_values_do_not_change_the_signature(write_script):
    first = run_script(write_script("from packaging.version import Version\nVersion('1 2')\n", "a.py"))
    second = run_script(write_script("import os\n\n\nfrom packaging.version import Version\nVersion('70 8')\n", "b.py"))
    assert first.signature == second.signature


def test_timeout_kills_the_whole_process_group(write_script, tmp_path):
    pid_file = tmp_path / "child.pid"
    script = write_script(f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        while True:
            time.sleep(0.1)
    """)
    start = time.monotonic()
    result = run_script(script, timeout=3)
    assert time.monotonic() - start < 30
    assert result.signature.kind == "timeout"
    child = int(pid_file.read_text())
    time.sleep(0.5)
    assert not _alive(child)  # the grandchild died with the group


def _alive(pid: int) -> bool:
    """Running (a zombie awaiting its reaper counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_timeout_signature_names_where_it_hung(write_script):
    script = write_script(
        "from packaging.version import Version\nimport time\n"
        "Version.__init__ = lambda self, v: time.sleep(300)\nVersion('1')\n"
    )
    result = run_script(script, timeout=3)
    assert result.signature.kind == "timeout"
    assert "Current thread" in result.stderr or "most recent call first" in result.stderr


@pytest.mark.parametrize(
    "body, name", [("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"), ("import os\nos.abort()\n", "SIGABRT")]
)
def test_crashes_are_outcomes(write_script, body, name):
    result = run_script(write_script(body), timeout=30)
    assert result.signature.kind == "signal" and result.signature.type == name
    assert "Fatal Python error" in result.stderr  # faulthandler left the Python stack


def test_oom_and_cuda_errors_are_kinds_of_their_own(write_script):
    oom = run_script(write_script("raise MemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n", "a.py"))
    cuda = run_script(write_script("raise RuntimeError('CUDA error: device-side assert triggered')\n", "b.py"))
    assert oom.signature.kind == "oom" and cuda.signature.kind == "cuda-error"


def test_exit_codes_and_logged_tracebacks(write_script):
    plain = run_script(write_script("import sys\nsys.exit(3)\n", "a.py"))
    assert plain.signature.kind == "exit" and plain.signature.type == "exit 3"
    logged = run_script(
        write_script(
            """
        import sys, traceback
        try:
            {}["missing"]
        except KeyError:
            traceback.print_exc()
            sys.exit(1)
    """,
            "b.py",
        )
    )
    assert logged.signature.headline == "KeyError: <key>" and logged.raw_headline == "KeyError: 'missing'"


def test_interpreter_is_selectable_and_checked(write_script):
    script = write_script("import sys\nprint(sys.executable)\n")
    assert run_script(script, python=sys.executable).stdout.strip() == sys.executable
    with pytest.raises(MinreproError, match="interpreter not found"):
        run_script(script, python="/nonexistent/python3")


def test_script_sees_ordinary_argv_and_is_not_modified(write_script):
    script = write_script("import sys\nprint(sys.argv)\n")
    before = script.read_bytes()
    result = run_script(script, args=["--x", "1"])
    assert result.stdout.strip() == repr([str(script.resolve()), "--x", "1"])
    assert script.read_bytes() == before


def test_missing_script_is_a_clean_error(tmp_path):
    with pytest.raises(MinreproError, match="no such script"):
        run_script(tmp_path / "nope.py")


def test_an_isolated_run_cannot_write_beside_the_script(write_script):
    # peft's offload copy of an absolute checkpoint path lands under the working directory (family I): a case run
    # from the checkout must not leave it there
    script = write_script("import os\nos.makedirs('tmp/x')\nopen('tmp/x/model.safetensors', 'w').close()\n", "w.py")
    result = run_script(script, isolated=True)
    assert result.signature is None
    assert not (script.parent / "tmp").exists()
    with pytest.raises(MinreproError, match="not both"):
        run_script(script, isolated=True, cwd=script.parent)


FAKE_TRANSFORMERS = """
class _Param:
    def __init__(self, device):
        self.device = device


class Int8Params(_Param):
    pass


class PreTrainedModel:
    @classmethod
    def from_pretrained(cls, path, **kwargs):
        model = cls()
        model.hf_device_map = {"model.embed_tokens": "cpu", "model.layers.0": 0}
        return model

    def parameters(self):
        return [Int8Params("cuda:0"), _Param("cpu"), _Param("cpu")]


class LlamaForCausalLM(PreTrainedModel):
    pass
"""


def traced_with_stand_in(tmp_path, script, package: str, module: str, source: str):
    """Run `script` traced, with a stand-in `package.module` (the library the trace wraps) first on its path."""
    site = tmp_path / "site" / package
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / f"{module}.py").write_text(source)
    return run_script(script, env={"PYTHONPATH": str(tmp_path / "site")}, trace=True, isolated=True)


def test_a_trace_records_the_map_from_pretrained_inferred_and_where_each_weight_type_landed(tmp_path, write_script):
    # transformers 5 calls dispatch_model only when the map splits: a budget that sends everything to one device
    # leaves no dispatch record, so the load itself must say where the model went
    script = write_script(
        "from transformers.modeling_utils import LlamaForCausalLM\n"
        "model = LlamaForCausalLM.from_pretrained('x', device_map='auto')\n"
        "assert type(model).__name__ == 'LlamaForCausalLM'\n"
    )
    result = traced_with_stand_in(tmp_path, script, "transformers", "modeling_utils", FAKE_TRANSFORMERS)
    assert result.signature is None, result.stderr
    started, record = result.trace  # the load as it starts (what a twin of a load that fails is built from), then
    assert started["status"] == "started" and started["line"] == 2 and "model_trace_error" in started  # no config
    assert "config'" in record.pop("model_trace_error")  # the stand-in has no config: the placement still stands
    assert record == {
        "event": "from_pretrained",
        "status": "returned",
        "caller": "LlamaForCausalLM",
        "devices": {"cpu": 1, "0": 1},
        "device_map": {"model.embed_tokens": "cpu", "model.layers.0": "0"},
        "parameters": {"Int8Params@cuda:0": 1, "_Param@cpu": 2},
        "line": 2,
        "model_class": "LlamaForCausalLM",
    }  # the script line that loaded it


def test_a_relative_interpreter_path_works_from_anywhere(tmp_path, write_script, monkeypatch):
    # `--python .venv/bin/python` failed with "No such file": the run's cwd is elsewhere
    link = tmp_path / "env" / "bin"
    link.mkdir(parents=True)
    (link / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    result = run_script(write_script("raise KeyError(1)\n"), python="env/bin/python", isolated=True)
    assert result.raw_headline == "KeyError: 1"


def test_a_cpu_feature_can_be_emulated_absent_before_the_library_reads_it(tmp_path, write_script):
    # bitsandbytes asks its native library once, when its CPU backend registers kernels at import: the answer must
    # be False by then, or the no-harm proof of H's patch runs with the AVX512-BF16 kernel registered anyway
    site = tmp_path / "site" / "bitsandbytes"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("from .cextension import lib\nAT_IMPORT = bool(lib.has_avx512bf16_cpu())\n")
    (site / "cextension.py").write_text(
        "class _Lib:\n    def has_avx512bf16_cpu(self):\n        return 1\n\nlib = _Lib()\n"
    )
    script = write_script("import bitsandbytes\nprint('avx512bf16 at import:', bitsandbytes.AT_IMPORT)\n")
    pythonpath = {"PYTHONPATH": str(tmp_path / "site")}
    assert "at import: True" in run_script(script, env=pythonpath, isolated=True).stdout
    plain = run_script(script, env=pythonpath, isolated=True)
    assert plain.emulated_absent == ()
    emulated = run_script(script, env={**pythonpath, "MINREPRO_EMULATE_ABSENT": "avx512_bf16"}, isolated=True)
    assert "at import: False" in emulated.stdout, emulated.stderr
    assert emulated.emulated_absent == ("avx512_bf16",)  # it took effect, and the run says so
    untouched = write_script("print('no bitsandbytes here')\n", "other.py")
    assert run_script(untouched, env={"MINREPRO_EMULATE_ABSENT": "avx512_bf16"}, isolated=True).emulated_absent == ()
    unknown = run_script(script, env={**pythonpath, "MINREPRO_EMULATE_ABSENT": "amx_tile"}, isolated=True)
    assert "cannot emulate a CPU without amx_tile" in unknown.stderr


def test_an_emulation_refuses_a_library_imported_before_the_script():
    # a warm executor preloads bitsandbytes, which asks for AVX512-BF16 at import: emulating after that is a no-op
    import sys as _sys

    from minrepro.harness import _bootstrap

    _sys.modules.setdefault("bitsandbytes.cextension", object())
    try:
        with pytest.raises(SystemExit, match="imported before the script"):
            _bootstrap.emulate_absent("avx512_bf16")
    finally:
        if _sys.modules.get("bitsandbytes.cextension").__class__ is object:
            del _sys.modules["bitsandbytes.cextension"]


FAKE_TORCH_TRANSFORMERS = """
import types

import torch


class AlignDevicesHook:  # accelerate's hook as the trace reads it: attributes only
    execution_device, io_same_device, offload = "cuda:1", True, False


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(2, 2, device="meta")  # an offloaded weight's placeholder
        self.state = types.SimpleNamespace(SCB=torch.ones(2, device="meta"))  # Linear8bitLt's matmul state
        self.__dict__["_hf_hook"] = AlignDevicesHook()

    def forward(self, x):
        raise RuntimeError("Expected all tensors to be on the same device, but got mat2 is on meta")


class PreTrainedModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(2))
        self.scale.SCB = torch.ones(2)  # INT8 statistics kept beside a weight, as bitsandbytes' Int8Params does
        self.inner = Inner()

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        return cls()

    def forward(self, ids):
        hidden = ids.float() * self.scale
        return self.inner(hidden)
"""


def test_a_failing_traced_run_says_where_the_modules_on_its_stack_and_their_tensors_were(tmp_path, write_script):
    # a cross-device error names two devices; which module held which side is what a maintainer asks first
    pytest.importorskip("torch")
    script = write_script(
        "import torch\nfrom transformers.modeling_utils import PreTrainedModel\n"
        "model = PreTrainedModel.from_pretrained('x')\nmodel(torch.ones(1, 2))\n"
    )
    result = traced_with_stand_in(tmp_path, script, "transformers", "modeling_utils", FAKE_TORCH_TRANSFORMERS)
    assert result.raw_headline.startswith("RuntimeError: Expected all tensors")
    (failure,) = [r for r in result.trace if r["event"] == "failure"]
    outer, inner = failure["modules"]
    assert (outer["module"], outer["class"], outer["function"]) == (
        "(root)",
        "PreTrainedModel",
        "PreTrainedModel.forward",
    )
    assert outer["weights"] == {"cpu": 1} and outer["weights_below"] == {"cpu": 1, "meta": 2}
    assert outer["tensors"] == {"ids": ["cpu"], "hidden": ["cpu"]} and outer["hooks"] == []
    assert (inner["module"], inner["weights"], inner["weights_below"]) == ("inner", {}, {"meta": 2})
    assert outer["side_tensors"] == {"scale.SCB": "cpu"} and inner["side_tensors"] == {"state.SCB": "meta"}
    assert inner["tensors"] == {"x": ["cpu"]}
    assert inner["hooks"] == [
        {"type": "AlignDevicesHook", "execution_device": "cuda:1", "io_same_device": True, "offload": False}
    ]
    from minrepro.harness.placement import placement_lines

    lines = placement_lines(result.trace)
    assert lines[0].startswith("load    PreTrainedModel.from_pretrained")
    assert lines[-1] == (
        "  Inner.forward [inner]: none, state.SCB meta / meta×2 | AlignDevicesHook(execution cuda:1, "
        "io_same_device True) | x cpu"
    )
    untraced = run_script(script, env={"PYTHONPATH": str(tmp_path / "site")}, isolated=True)
    assert untraced.trace == () and untraced.signature == result.signature  # observing changes nothing


FAKE_ACCELERATE = """
class Hook:
    offload = False

    def __init__(self, device):
        self.execution_device = device


def dispatch_model(model, device_map, main_device=None):
    model.__dict__["_hf_hook"] = Hook(sorted(set(device_map.values()))[0])  # 1.15: the main device from a set
    return model
"""


def test_a_traced_dispatch_says_which_main_device_the_release_chose_beside_the_documented_one(tmp_path, write_script):
    # family AD: accelerate 1.15 ran the root entry on cuda:0 for {"": 1, "1": 0}; the trace had said "main 1"
    script = write_script(
        "from accelerate.big_modeling import dispatch_model\n"
        "class Model:\n    def modules(self):\n        return [self]\n"
        "    def named_parameters(self):\n        return []\n"
        "dispatch_model(Model(), {'': 1, '1': 0})\n"
    )
    result = traced_with_stand_in(tmp_path, script, "accelerate", "big_modeling", FAKE_ACCELERATE)
    assert result.signature is None, result.stderr
    started, returned = result.trace
    assert (started["main_device"], returned["root_execution_device"]) == ("1", 0)
    from minrepro.harness.placement import placement_lines

    assert placement_lines(result.trace) == [
        "dispatch by __main__:<module>: map 1×1, 0×1, main 1 | hooks: execution 0×1, offloading 0, root's 0"
    ]


def test_each_dispatch_is_one_record_even_with_other_events_between_its_start_and_return():
    # the scenario tables read PEFT's redispatch from these: a record of another event written while a dispatch was
    # under way must not leave it as two half records
    from minrepro.harness.placement import dispatch_calls, merged_dispatches

    trace = [
        {"event": "dispatch_model", "status": "started", "caller": "peft.peft_model:load_adapter"},
        {"event": "from_pretrained", "status": "returned"},
        {
            "event": "dispatch_model",
            "status": "returned",
            "caller": "peft.peft_model:load_adapter",
            "offloading_hooks": 2,
        },
        {"event": "dispatch_model", "status": "started", "caller": "__main__:<module>"},
    ]  # raised
    assert [r["event"] for r in merged_dispatches(trace)] == ["dispatch_model", "from_pretrained", "dispatch_model"]
    first, raised = dispatch_calls(trace)
    assert (first["status"], first["offloading_hooks"], raised["status"]) == ("returned", 2, "started")
