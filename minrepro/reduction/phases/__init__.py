"""The reduction's phases, one module each: `establish`, `scale_down`, `guard`, `search` (its set-up, the search and
the trigger report), `verify`. Each phase is a function `(Context, Results) -> its result` (`..results`); their order
is `PHASES` in `..driver`."""
