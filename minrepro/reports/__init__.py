"""Hand-off: issue drafts in each repository's bug template (`report`) and release bisection (`bisect`), for
catalog cases and for a user's own script. Imports the harness, catalog and envs; it never files anything."""
