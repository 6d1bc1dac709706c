"""minrepro: reduce, catalog, patch and prove cross-library bugs in the Hugging Face stack."""

from .errors import MinreproError
from .runner import RunResult, run_script
from .signature import Frame, Signature, normalize_message

__all__ = ["Frame", "MinreproError", "RunResult", "Signature", "normalize_message", "run_script"]
__version__ = "0.1.0"
