"""Run a script with every nested device_map spelled out before from_pretrained sees it: the placement that
patches/accelerate/root-entry-disk-offload computes inside dispatch_model, given by the user to an unpatched
accelerate. Comparing `python spell_nested_map.py W.py` (unpatched) with `python W.py` (patched env) checks that the
patch changes nothing but the nested entries. Usage: python spell_nested_map.py SCRIPT.py [ARGS...]
Recorded on family O's page (docs/families/root-entry-disk-offload.md) and results/explore/controls/family-o-witnesses-h100.txt."""
import runpy, sys

from accelerate import init_empty_weights
from transformers import AutoConfig, PreTrainedModel


def spell(model, device_map):
    spelled = dict(device_map)

    def holds_another(name):
        prefix = f"{name}." if name else ""
        return any(other != name and other.startswith(prefix) for other in spelled)

    outer = next((n for n in spelled if holds_another(n)), None)
    while outer is not None:
        device = spelled.pop(outer)
        module = model.get_submodule(outer)
        prefix = f"{outer}." if outer else ""
        for child, _ in module.named_children():
            spelled.setdefault(prefix + child, device)
        for tensor, _ in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
            spelled.setdefault(prefix + tensor, device)
        outer = next((n for n in spelled if holds_another(n)), None)
    return spelled


original = PreTrainedModel.from_pretrained.__func__


def from_pretrained(cls, path, *args, **kwargs):
    device_map = kwargs.get("device_map")
    if isinstance(device_map, dict) and len(device_map) > 1:
        with init_empty_weights():
            skeleton = cls._from_config(AutoConfig.from_pretrained(path))
        kwargs["device_map"] = spell(skeleton, device_map)
        print("spelled out:", kwargs["device_map"], file=sys.stderr)
    return original(cls, path, *args, **kwargs)


PreTrainedModel.from_pretrained = classmethod(from_pretrained)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
