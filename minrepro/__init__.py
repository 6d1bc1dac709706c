"""minrepro: reduce, catalog, patch and prove cross-library bugs in the Hugging Face stack.

Rooms, by role (each subpackage's docstring says what it owns and what it may import):
  harness/    run a script in isolation and name its failure (signature, runner, executors, oracles)
  catalog/    the verified repros, their manifest, the matrices and the patch proofs
  envs/       version sets, tool-created venvs, wheelhouse, patching, upstream tests, PR validation
  scenarios/  Gemma 4 scenarios as typed specs: presets, rendering, structured passes, tables, exploration
  reduction/  the reduce command's driver: guard (differential oracle), search, verification, output
  reports/    issue drafts and release bisection
  cli/        one module per command group
  reducers/   the search (passes, ddmin): proposes candidates, never runs them (top-level `reducers/`)
  patches/    the fix prototypes as diffs, package data (top-level `patches/`)
"""

from pathlib import Path as _Path

# In a checkout the design's top-level folders reducers/ and patches/ are this package's subpackages
# minrepro.reducers and minrepro.patches; a wheel maps them there by package-dir (pyproject.toml).
_CHECKOUT = _Path(__file__).resolve().parent.parent
if (_CHECKOUT / "reducers" / "__init__.py").is_file() and not (_Path(__file__).parent / "reducers").exists():
    __path__.append(str(_CHECKOUT))

from .errors import MinreproError  # noqa: E402
from .harness.runner import RunResult, run_script  # noqa: E402
from .harness.signature import Frame, Signature, normalize_message  # noqa: E402

__all__ = ["Frame", "MinreproError", "RunResult", "Signature", "normalize_message", "run_script"]
__version__ = "0.2.0"
