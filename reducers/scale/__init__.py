"""Scale-down proposals: a script that loads a real checkpoint is rewritten to build a tiny twin of the model it
loaded (same class, same structural config fields, dimensions shrunk) and to load that instead, with the device
maps the original run inferred written as literals so that the placement survives the shrink.

Pure source transformations over what a traced run recorded (`minrepro.harness._bootstrap`'s `from_pretrained`,
`PeftModel.from_pretrained` and `dispatch_model` records, passed in as plain dicts). Nothing here runs code: the
driver judges each proposal with the same differential oracle as every other candidate.

  plan    what the traced run showed (`Plan`, `plan_from_trace`) and a twin's config (`twin_config`)
  ids     the vocabulary a twin shrinks to and the token ids mapped into it
  twin    a twin's source (`twin_source`)
  ladder  the twins to try, the most shrunk first (`ladder`, `scale_down`)
"""

from .ids import (
    SMALLEST_VOCABULARY,
    TOKEN_ID,
    VOCAB_FIELD,
    VOCABULARY,
    id_literals,
    small_ids,
    vocabulary_floor,
    vocabulary_size,
)
from .ladder import Rung, ladder, scale_down
from .plan import (
    CONFIG_NOISE,
    SHRINK,
    TOWER_GONE,
    UNSET_MARK,
    Adapter,
    Load,
    Path_,
    Plan,
    Tokenized,
    plan_from_trace,
    twin_config,
    unreached_adapter_loads,
)
from .twin import twin_source

__all__ = [
    "CONFIG_NOISE",
    "SHRINK",
    "SMALLEST_VOCABULARY",
    "TOKEN_ID",
    "TOWER_GONE",
    "UNSET_MARK",
    "VOCABULARY",
    "VOCAB_FIELD",
    "Adapter",
    "Load",
    "Path_",
    "Plan",
    "Rung",
    "Tokenized",
    "id_literals",
    "ladder",
    "plan_from_trace",
    "scale_down",
    "small_ids",
    "twin_config",
    "twin_source",
    "unreached_adapter_loads",
    "vocabulary_floor",
    "vocabulary_size",
]
