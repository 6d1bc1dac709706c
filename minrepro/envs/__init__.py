"""Environments: the version sets (`sets.toml`), venvs that minrepro creates (the only ones it patches), the
offline wheelhouse, applying the diffs in `patches/`, the libraries' own tests, and validating a candidate
upstream change. Imports the harness for running; never the scenarios or the CLI."""
