"""Phase `oracle` (--oracle CMD): the user's own interestingness test decides; nothing to establish or guard."""

from __future__ import annotations

import json
import shlex

from ...errors import MinreproError
from ...harness.oracle import Cache, CommandOracle
from ...harness.runner import DEFAULT_TIMEOUT
from ..guard import UNDECIDED
from ..results import Context, Opened, Results
from ..workdirs import workdir


def command_oracle(ctx: Context, done: Results) -> Opened:
    opts = ctx.opts
    jobs, timeout = opts.jobs or 1, opts.timeout or DEFAULT_TIMEOUT
    key = json.dumps(["command", opts.oracle, ctx.python, timeout])
    folder = workdir(opts, ctx.script, ctx.source, key)
    oracle = CommandOracle(
        Cache(folder / "cache.jsonl", key), folder, timeout, ctx.home, command=shlex.split(opts.oracle), jobs=jobs
    )
    if not oracle.test_many([ctx.source])[0]:
        raise MinreproError(f"nothing to reduce: the oracle does not accept {ctx.script.name} itself")
    return Opened(oracle, None, UNDECIDED, folder, jobs, headline=f"oracle: {opts.oracle}")
