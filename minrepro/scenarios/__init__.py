"""Gemma 4 scenarios as typed specs: the spec (`spec`), the seeds' presets and what the seeds reported
(`presets`), rendering a spec to a standalone script (`render`), structured passes that propose simpler specs
(`passes`), running presets into tables (`table`), reducing a scenario to a toy (`reduce`), the README tables
(`matrix`) and searching the spec space for failures (`explore`). Imports the harness, catalog and reduction."""
