"""Phase `verify`: cold, in a fresh interpreter, the result fails with the signature, and passes (exit 0) where the
bug is fixed, as the original does there. A result that does not is an error, with the state kept."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...errors import MinreproError
from ...harness.executors import ColdExecutor
from ...harness.oracle import SignatureOracle
from ..guard import Guard
from ..options import GOOD_RUNS
from ..results import Context, Results, Verified


def final_result(done: Results) -> str:
    """The search's result, with its triggers made explicit where the trigger report did so."""
    return done.triggers.result if done.triggers else done.searched.result


def verify(ctx: Context, done: Results) -> Verified:
    opened, standing = done.opened, done.standing
    result = ctx.best = final_result(done)
    cold = verify_cold(result, opened.oracle, opened.guard, (ctx.python, standing.timeout), opened.jobs)
    if not cold.verified:
        reused = any(getattr(e, "reused", 0) for e in ctx.workers.taken)
        hint = "; the search reused warm workers: --fresh-workers gives each candidate its own" if reused else ""
        raise MinreproError(f"the reduced script {cold.why}; kept in {done.searched.state_path}{hint}")
    return Verified(cold.good_pass, cold.good_said, cold.loaded)


@dataclass(frozen=True)
class ColdCheck:
    """What the result's cold runs did: `verified`, else `why` not; where the bug is fixed, whether it passed (None:
    unguarded) and in words; the packages the bad run loaded (what the output's pins must name)."""

    verified: bool
    good_pass: bool | None = None
    why: str = ""
    loaded: tuple[str, ...] = ()
    good_said: str = ""


def verify_cold(
    result: str, oracle: SignatureOracle, guard: Guard, bad_env: tuple[str, float], jobs: int = 1
) -> ColdCheck:
    """The result fails with the signature in a fresh interpreter; and (unless unguarded) it passes, exit 0, in the
    good environments. No run-time budget here: a cold run pays the imports the budget excludes. The bad run and the
    good runs go side by side, `jobs` at once (what memory allows for what the search ran): a twin that runs to its
    end where the bug is fixed takes longer than its bad run."""
    (python, timeout), home = bad_env, oracle.home  # the search's own: its work dir and the script's directory
    path = oracle.workdir / "verify.py"
    path.write_text(result, encoding="utf-8")
    runs = [(python, timeout)] + [
        (py, oracle.good_timeout or timeout) for py in guard.pythons for _ in range(max(GOOD_RUNS, oracle.good_runs))
    ]  # the search may have run fewer
    at_once = max(1, min(jobs, len(runs)))  # also each run's share of the cores (thread_cap)
    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(lambda run: ColdExecutor(run[0], at_once).run_many([path], run[1], home)[0], runs))
    bad = results[0]
    if not oracle.matches(bad):
        ended = bad.signature.headline if bad.signature else "passed"
        return ColdCheck(False, why=f"does not reproduce in a fresh interpreter ({ended} after {bad.seconds:.0f} s)")
    if why := oracle.litters(bad):
        return ColdCheck(False, why=f"{why} (cold)")
    if not guard.pythons:
        return ColdCheck(True, loaded=bad.loaded)
    good = list(zip((py for py, _ in runs[1:]), results[1:], strict=False))
    failing = [(py, run) for py, run in good if run.signature is not None]
    if failing:
        what = "; ".join(sorted({f"{oracle.not_passing(run)} under {py}" for py, run in failing}))
        return ColdCheck(False, False, f"does not pass where the bug is fixed: {what}", bad.loaded)
    seconds = ", ".join(f"{run.seconds:.1f}" for _, run in good)
    return ColdCheck(
        True, True, "", bad.loaded, f"passes: exit 0 in {len(good)} of {len(good)} cold runs ({seconds} s)"
    )
