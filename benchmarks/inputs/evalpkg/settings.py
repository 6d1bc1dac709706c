"""Model sizes and placements the evaluation jobs share."""
from dataclasses import dataclass, field


@dataclass
class EvalSettings:
    hidden: int = 64
    layers: int = 4
    kv_shared: int = 2
    targets: list = field(default_factory=lambda: ["q_proj"])
    offload: dict = field(default_factory=lambda: {"lm_head": "disk"})
    new_tokens: int = 2
    prompt: tuple = (1, 2, 3)


PRESETS = {"tiny": EvalSettings(), "tiny-noshare": EvalSettings(kv_shared=0)}
