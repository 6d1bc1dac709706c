"""A command line as the user types it (`accelerate launch [OPTIONS] job.py ARGS`, `python job.py ARGS`,
`python -m pkg.train ARGS`), read into what runs: a script or a module, its arguments, and the variables the
launcher sets. `accelerate launch` is read by accelerate's own parser in the environment the script runs in, so
its config file and defaults apply as they would; only a launch of one process is taken."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field

from ..errors import MinreproError
from ..harness.runner import resolve_python

MARK = "MINREPRO-LAUNCH "
# Run under the target env: accelerate's own reading of the launch options, and the environment its one-process
# launcher (`simple_launcher`) gives the script. What it adds to or changes in the environment is printed.
ACCELERATE_PROBE = r"""
import json, os, sys
from accelerate.commands.launch import launch_command_parser, _validate_launch_command
from accelerate.utils.launch import prepare_simple_launcher_cmd_env
args = launch_command_parser().parse_args(sys.argv[1:])
args, defaults, _ = _validate_launch_command(args)
several = [name for name in ("multi_gpu", "use_deepspeed", "use_fsdp", "use_megatron_lm", "tpu")
           if getattr(args, name, False)]
processes = (args.num_processes or 1) * (args.num_machines or 1)
if several or processes > 1:
    print("MINREPRO-LAUNCH " + json.dumps({"refuse": several or [f"{processes} processes"]}))
    sys.exit(0)
cmd, env = prepare_simple_launcher_cmd_env(args)
changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
print("MINREPRO-LAUNCH " + json.dumps({"target": args.training_script, "args": list(args.training_script_args),
                                       "module": bool(args.module), "env": changed}))
"""


@dataclass
class Launch:
    target: str  # a script path, or a module name when `module`
    args: list[str]
    module: bool = False
    env: dict[str, str] = field(default_factory=dict)  # what the launcher sets for the script


def is_command_line(words: list[str]) -> bool:
    return bool(words) and (words[:2] == ["accelerate", "launch"] or words[0] in ("python", "python3"))


def read_command_line(words: list[str], python: str | None) -> Launch:
    if words[:2] == ["accelerate", "launch"]:
        return accelerate_launch(words[2:], python)
    rest = words[1:]
    if rest[:1] == ["-m"] and len(rest) > 1:
        return Launch(rest[1], rest[2:], module=True)
    if not rest or rest[0].startswith("-"):
        raise MinreproError(
            f"`{' '.join(words[:3])}`: give the script (or -m MODULE) right after {words[0]}; "
            "interpreter options are not read"
        )
    return Launch(rest[0], rest[1:])


def accelerate_launch(options: list[str], python: str | None) -> Launch:
    interpreter = resolve_python(python)
    try:
        done = subprocess.run(
            [interpreter, "-c", ACCELERATE_PROBE, *options],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise MinreproError("reading the `accelerate launch` options took over 300 s") from None
    found = [line[len(MARK) :] for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise MinreproError(f"accelerate could not read the launch options under {interpreter}: {last[:200]}")
    data = json.loads(found[-1])
    if "refuse" in data:
        raise MinreproError(
            f"`accelerate launch` here would start {', '.join(data['refuse'])}: minrepro reduces a "
            "launch of one process (add --num_processes 1, or run the script as one process)"
        )
    return Launch(data["target"], data["args"], data["module"], data["env"])
