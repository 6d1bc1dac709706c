"""Reduction passes, by domain, and their registry: the ordered lists below. Add a pass by adding a function to
the module of its domain and the pass to `PASSES` (or `FINAL_PASSES`) where it belongs in the order.

Two shapes of pass:
- a *generator* ``(tree) -> Iterator[ast.Module]`` proposes one local simplification per candidate; the
  search accepts the first interesting one and asks again (wrapped by `greedy`, `sweep`: `combinators`);
- a *ddmin pass* ``(problem) -> None`` drives delta debugging over a list (statements, lines).
Passes never run code: they only propose. `reducers.search.Problem` answers interesting / not.

The modules: `structure` (wrappers unwrapped, loops run once, literals folded), `functions` and `classes`
(inlining), `statements` (ddmin, dead definitions), `vocabularies` (arguments, dict entries, literals),
`devices` (device maps, layer stacks), `profiled` (what a run showed), `hygiene` (imports, dead stores, paths,
idioms), `combinators` (`greedy`, `sweep`, `together`); `common` holds what they share.
"""

from __future__ import annotations

from .common import Generator, Pass
from .combinators import greedy, sweep, together
from .structure import (
    drop_decorators,
    fold_constants,
    unroll_comprehensions,
    unroll_loops,
    unwrap_calls,
    unwrap_conditional_expressions,
    unwrap_if,
    unwrap_main_guard,
    unwrap_raise,
    unwrap_try,
    unwrap_with,
)
from .functions import drop_unused_parameters, inline_functions, inline_nested_calls
from .classes import dataclass_defaults, drop_empty_classes, flatten_instances, init_values, inline_methods
from .statements import (
    delete_lines,
    delete_statements,
    drop_all_dead_definitions,
    inline_single_use_variables,
    remove_dead_definitions,
)
from .vocabularies import (
    constant_attributes,
    drop_arguments,
    drop_dict_entries,
    drop_dict_runs,
    shrink_twin_vocabularies,
    simplify_constants,
)
from .devices import (
    coarsen_device_maps,
    compact_lists,
    constant_list,
    fewer_layers,
    fewer_unplaced_layers,
    shorten_device_maps,
)
from .profiled import backward_slice, drop_unexecuted, resolve_recorded_values, slice_to_failure
from .hygiene import (
    drop_dead_assignments,
    drop_duplicate_imports,
    drop_environment_settings,
    drop_unused_imports,
    is_machine_path,
    machine_paths,
    merge_module_imports,
    simplify_idioms,
)

# helpers the tests call directly
from .common import _names_loaded as _names_loaded, _render as _render
from .hygiene import (
    _bound_name as _bound_name,
    _dead_stores as _dead_stores,
    _import_key as _import_key,
    _imports as _imports,
)


# What a run showed first (the biggest cuts, in one candidate each), then structure (cheap, big steps), then
# statements, then definitions and details.
PASSES: list[Pass] = [
    # what only restructures the script, all in one candidate first. Not the clean-up after the slice: taken blindly,
    # its first proposals drop the failing call with its unread result (refused on each of three jobs, a run lost)
    together(
        "restructure",
        greedy(drop_environment_settings),
        greedy(unwrap_main_guard),
        drop_duplicate_imports,
        greedy(inline_functions),
        greedy(fold_constants),
        greedy(inline_functions),
        greedy(unwrap_with),
    ),
    # the run's environment, written as the first lines of a prepared script: one candidate drops them all
    greedy(drop_environment_settings, chain=True),
    # `main()` under a guard hides the failing statement from the slice: unwrap and inline it first
    greedy(unwrap_main_guard),
    # the model first, then the text: a twin's stack cut to one layer per run of its devices makes every later
    # candidate cheaper (until then every candidate builds and offloads each of the original's layers)
    greedy(fewer_layers),
    greedy(fewer_unplaced_layers),  # a stack no literal map places: its per-layer fields cut with it
    drop_duplicate_imports,  # the twin's `import tempfile` beside the script's own: one candidate
    greedy(drop_decorators),
    greedy(inline_functions, chain=True),
    resolve_recorded_values,  # before the slice: the parser and config objects then fall off it
    greedy(machine_paths),  # a path of this machine a resolved value brought in, while `tempfile` is still imported
    greedy(fold_constants),  # `if False: return 0` (a resolved `--dry-run`) blocks inlining `main()`
    greedy(inline_functions, chain=True),
    # a job inside `with tempfile.TemporaryDirectory() as root:` is one statement to the slice
    greedy(unwrap_with, chain=True),
    drop_unexecuted,
    slice_to_failure,
    # a twin's vocabularies kept at real size for what the good path read past the failure: the slice has cut it
    greedy(shrink_twin_vocabularies),
    drop_all_dead_definitions,
    greedy(unroll_comprehensions),  # `[server.answer(r) for r in requests]`: one call, which the next pass takes
    greedy(inline_methods, chain=True),  # a class around the failing call: `server.start()` becomes its body
    greedy(flatten_instances, chain=True),  # then the instance's attributes: its arguments, or its values alone
    greedy(init_values, chain=True),  # `Backend(args.dir)._offload`: the value its `__init__` set, as written
    greedy(dataclass_defaults, chain=True),  # `Config().root`, which the one above may leave: the field's default
    # what the slice leaves unread, each in one candidate: a budget that ends here still hands over a clean script
    drop_dead_assignments,
    drop_unused_imports,
    greedy(unwrap_raise, chain=True),
    greedy(unwrap_try, chain=True),
    greedy(unwrap_with, chain=True),
    greedy(unwrap_if, chain=True),
    greedy(unwrap_conditional_expressions, chain=True),
    greedy(unroll_loops),
    delete_statements,
    drop_all_dead_definitions,  # what the deleted statements read is dead now: one run, not one per name
    drop_unused_parameters,  # after the deletions, which leave parameters unread
    inline_single_use_variables,  # `root = mkdtemp()` read once: one line less each, all in one candidate
    # an instance the inlining built in place (`Server(Config(x)).config.root`): read before the sweeps
    greedy(init_values, chain=True),
    greedy(dataclass_defaults, chain=True),
    greedy(unwrap_calls, chain=True),
    greedy(inline_functions, chain=True),
    greedy(inline_nested_calls, chain=True),
    greedy(remove_dead_definitions, chain=True),
    sweep(constant_attributes),
    drop_dead_assignments,
    drop_unused_imports,
    sweep(drop_arguments),
    greedy(coarsen_device_maps),  # before entries go one by one
    greedy(fewer_unplaced_layers),  # a map coarsened to its root entry no longer places the layers
    sweep(drop_dict_runs),
    sweep(drop_dict_entries),
    sweep(simplify_constants),
    greedy(simplify_idioms),  # what a maintainer would not write (issue: `os.path.join(x)`, a no-op `.to()`)
    greedy(drop_empty_classes),
    greedy(fold_constants),
    drop_all_dead_definitions,
]


# Last in each round: the forms a maintainer reads best, which the passes above (which read literal maps and lists)
# no longer need to read; then what the rewrites left unread; then lines.
FINAL_PASSES: list[Pass] = [
    greedy(merge_module_imports, chain=True),  # the twin's `import transformers` beside the script's from-import
    greedy(shorten_device_maps),
    greedy(compact_lists),
    greedy(machine_paths),
    drop_dead_assignments,
    drop_unused_imports,
    drop_duplicate_imports,
    delete_lines,
]

__all__ = [
    "FINAL_PASSES",
    "PASSES",
    "Generator",
    "Pass",
    "backward_slice",
    "coarsen_device_maps",
    "compact_lists",
    "constant_attributes",
    "constant_list",
    "dataclass_defaults",
    "delete_lines",
    "delete_statements",
    "drop_all_dead_definitions",
    "drop_arguments",
    "drop_dead_assignments",
    "drop_decorators",
    "drop_dict_entries",
    "drop_dict_runs",
    "drop_duplicate_imports",
    "drop_empty_classes",
    "drop_environment_settings",
    "drop_unexecuted",
    "drop_unused_imports",
    "drop_unused_parameters",
    "fewer_layers",
    "fewer_unplaced_layers",
    "flatten_instances",
    "fold_constants",
    "greedy",
    "init_values",
    "inline_functions",
    "inline_methods",
    "inline_nested_calls",
    "inline_single_use_variables",
    "is_machine_path",
    "machine_paths",
    "merge_module_imports",
    "remove_dead_definitions",
    "resolve_recorded_values",
    "shorten_device_maps",
    "shrink_twin_vocabularies",
    "simplify_constants",
    "simplify_idioms",
    "slice_to_failure",
    "sweep",
    "together",
    "unroll_comprehensions",
    "unroll_loops",
    "unwrap_calls",
    "unwrap_conditional_expressions",
    "unwrap_if",
    "unwrap_main_guard",
    "unwrap_raise",
    "unwrap_try",
    "unwrap_with",
]
