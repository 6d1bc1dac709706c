"""minrepro: reduce, catalog, patch and prove cross-library bugs in the Hugging Face stack.

Rooms, by role (each subpackage's docstring says what it owns and what it may import):
  harness/    run a script in isolation and name its failure (signature, runner, executors, oracles)
  catalog/    the verified repros, their manifest, the matrices and the patch proofs
  envs/       version sets, tool-created venvs, wheelhouse, patching, upstream tests, PR validation
  scenarios/  Gemma 4 scenarios as typed specs: presets, rendering, structured passes, tables, exploration
  reduction/  the reduce command's driver: guard (differential oracle), search, verification, output
  reports/    issue drafts and release bisection
  cli/        one module per command group
  reducers/   the search (passes, ddmin): proposes candidates, never runs them (top-level `reducers/`, linked here)
  patches/    the fix prototypes as diffs, package data (top-level `patches/`, linked here)
"""

from .errors import MinreproError
from .harness.runner import RunResult, run_script
from .harness.signature import Frame, Signature, normalize_message

__all__ = ["Frame", "MinreproError", "RunResult", "Signature", "normalize_message", "run_script"]
__version__ = "0.2.0"
