"""Real users' scripts as test inputs, without committing them: adapt a fetched copy to run offline at tiny scale.

    python benchmarks/user_scripts.py adapt NAME --source FETCHED_FILE --arch gemma4|llama [--max-memory DICT]
    python benchmarks/user_scripts.py run SCRIPT --python PY

`adapt` checks the copy's sha256 against `user_scripts.toml`, applies that entry's substitutions (each must match
exactly once, so a changed upstream file fails loudly) and writes `.minrepro/user/NAME-ARCH[-BUDGET].py` (git
ignored). The result is standalone: it builds its own random tiny model (a Gemma 4 with a vision tower, or a Llama
as the control), word-level tokenizer and chat-format data file in a temp dir, so a reducer can reduce all of it.
`run` runs a script traced and prints one JSON line: how it ended and every placement it made (the map
`from_pretrained` inferred and where each type of weight landed; each `dispatch_model`: quantized weights under
offload hooks, the hooks' execution devices): what the run exercised.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

CHECKPOINT = """
def tiny_checkpoint():  # added by minrepro's benchmarks/user_scripts.py: a random tiny {arch}, not the hub model
    import random
    import tempfile
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, {classes}
    words = "the a answer question what is why how data layer adapter weight device memory cpu gpu train".split()
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "user", "model"]
    core = Tokenizer(models.WordLevel({{w: i for i, w in enumerate(specials + words)}}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    root = tempfile.mkdtemp()
    torch.manual_seed(0)
    {build}
    PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(root)
    rng = random.Random(0)
    with open(root + "/train.txt", "w") as fh:
        for _ in range(8):
            q, a = (" ".join(rng.choice(words) for _ in range(12)) for _ in range(2))
            fh.write(f"<bos> <start_of_turn> user {{q}} <end_of_turn> <start_of_turn> model {{a}} <end_of_turn>\\n")
    return root, root + "/train.txt"
"""


def checkpoint_source(arch: str) -> str:
    from minrepro.scenarios.spec import text_config
    from minrepro.scenarios.spec import TINY_TEXT, VISION

    if arch == "gemma4":
        classes = "Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig"
        build = (
            f"config = Gemma4Config(text_config=Gemma4TextConfig(**{text_config(TINY_TEXT)!r}), "
            f"vision_config=Gemma4VisionConfig(**{VISION['tiny']!r}))\n"
            "    Gemma4ForConditionalGeneration(config).to(torch.bfloat16).save_pretrained(root)"
        )
    else:  # the control: the same script on an architecture without Gemma 4's own modules
        classes = "LlamaConfig, LlamaForCausalLM"
        build = (
            "config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4, "
            "num_attention_heads=2, num_key_value_heads=1)\n"
            "    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(root)"
        )
    return CHECKPOINT.format(arch=arch, classes=classes, build=build).strip("\n")


def entry(name: str) -> dict:
    scripts = tomllib.loads((HERE / "user_scripts.toml").read_text())["script"]
    found = [s for s in scripts if s["name"] == name]
    if not found:
        sys.exit(f"user_scripts.py: no script named {name!r} (known: {', '.join(s['name'] for s in scripts)})")
    return found[0]


def adapt(name: str, source: Path, arch: str, max_memory: str | None, out: Path) -> Path:
    spec = entry(name)
    text = source.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != spec["sha256"]:
        sys.exit(
            f"user_scripts.py: {source} is not {spec['repo']}@{spec['commit'][:8]}:{spec['path']} "
            f"(sha256 {digest[:12]}, expected {spec['sha256'][:12]})"
        )
    values = {"checkpoint": checkpoint_source(arch), "max_memory": max_memory or "None"}
    for pattern, replacement in spec["substitutions"]:
        filled = re.sub(r"\{(\w+)\}", lambda m: values.get(m[1], m[0]), replacement)
        text, count = re.subn(pattern, lambda _, filled=filled: filled, text, flags=re.MULTILINE)
        if count != 1:
            sys.exit(f"user_scripts.py: {pattern!r} matched {count} times in {source}, not once")
    out.mkdir(parents=True, exist_ok=True)
    budget = re.sub(r"\W+", "", max_memory or "")[:24]
    target = out / f"{name}-{arch}{'-' + budget if budget else ''}.py"
    target.write_text(
        f"# adapted by benchmarks/user_scripts.py from {spec['repo']}@{spec['commit']}:{spec['path']}\n" + text,
        encoding="utf-8",
    )
    return target


def run(script: Path, python: str) -> dict:
    from minrepro.harness.runner import run_script

    result = run_script(script, python=python, timeout=300, isolated=True, trace=True)
    placements = [
        {
            k: r[k]
            for k in (
                "event",
                "caller",
                "devices",
                "parameters",
                "offloaded_quantized_weights",
                "offloading_hooks",
                "execution_devices",
                "device_map",
            )
            if k in r
        }
        for r in result.trace
        if r.get("status") == "returned"
    ]
    return {
        "script": script.name,
        "python": python,
        "seconds": round(result.seconds, 1),
        "outcome": result.raw_headline if result.failed else "pass",
        "owner": str(result.signature.owner) if result.failed else "",
        "placements": placements,
        "traceback": result.stderr.strip().splitlines()[-40:],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("adapt")
    a.add_argument("name")
    a.add_argument("--source", type=Path, required=True, help="the fetched upstream file")
    a.add_argument("--arch", choices=["gemma4", "llama"], default="gemma4")
    a.add_argument("--max-memory", help='the budget as a Python dict, e.g. \'{0: "150KB", "cpu": "1GiB"}\'')
    a.add_argument("--out", type=Path, default=HERE.parent / ".minrepro" / "user")
    r = sub.add_parser("run")
    r.add_argument("script", type=Path)
    r.add_argument("--python", required=True)
    args = parser.parse_args(argv)
    if args.command == "adapt":
        print(adapt(args.name, args.source, args.arch, args.max_memory, args.out))
    else:
        print(json.dumps(run(args.script, args.python)))


if __name__ == "__main__":
    main()
