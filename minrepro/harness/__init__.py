"""The harness: run a script in a process of its own and say how it ended, as a `Signature` (a small value
compared by equality); executors that run many candidates (cold, fork server, warm pool); oracles that answer
"interesting or not" for the search. Imports only the standard library, `packaging` and `minrepro.errors`;
nothing here knows the catalog, the scenarios or the search."""
