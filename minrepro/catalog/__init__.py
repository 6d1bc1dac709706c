"""The catalog: one verified repro per bug family (`cases/`), the manifest that declares per version set
whether each fails or passes, running cases and judging them (`run`), the README matrices (`matrix`) and the
patch proofs (`proof`). Imports the harness and envs; never the scenarios or the CLI."""

from .manifest import FAILING, Case, Catalog, load_catalog

__all__ = ["FAILING", "Case", "Catalog", "load_catalog"]
