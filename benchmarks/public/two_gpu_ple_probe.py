"""Which device maps meet family AF's sum in `project_per_layer_inputs` (two GPUs). The first toy (root on cuda:0,
the per-layer embedding alone on cuda:1) passed on pinned and newest, unpatched; explore's row (root on cuda:1, the
per-layer embedding on cuda:0, more entries, generate) failed there. Each variant runs in its own process:
`python two_gpu_ple_probe.py` prints one line per variant (the map, forward or generate, passes or the error, and
whether the text model has a hook that moves its inputs)."""

import json
import subprocess
import sys
import tempfile

LM = "model.language_model."
VARIANTS = {
    "toy: root 0, per-layer embedding 1": {"": 0, LM + "embed_tokens_per_layer": 1},
    "reversed: root 1, per-layer embedding 0": {"": 1, LM + "embed_tokens_per_layer": 0},
    "explore's row's map": {"": 1, LM + "layers.1": 0, LM + "layers.3.mlp": 1, LM + "embed_tokens_per_layer": 0},
    "per-layer embedding and the text model's projection apart, layers split": {
        "": 0,
        LM + "embed_tokens_per_layer": 1,
        LM + "layers.1": 1,
    },
}


def child(path: str, name: str, call: str) -> None:
    import torch
    from transformers import Gemma4ForConditionalGeneration

    model = Gemma4ForConditionalGeneration.from_pretrained(path, device_map=VARIANTS[name])
    text = model.model.language_model
    hook = getattr(text, "_hf_hook", None)
    ids = torch.tensor([[2, 3, 4, 5]], device=0)
    try:
        (
            model.generate(input_ids=ids, max_new_tokens=2, do_sample=False)
            if call == "generate"
            else model(input_ids=ids)
        )
        outcome = "passes"
    except RuntimeError as error:
        outcome = str(error).splitlines()[0][:120]
    print(
        json.dumps(
            {
                "variant": name,
                "call": call,
                "outcome": outcome,
                "text model hook": repr(hook)[:80],
                "projection on": str(text.per_layer_model_projection.weight.device),
                "per-layer embedding on": str(text.embed_tokens_per_layer.weight.device),
            }
        )
    )


def main() -> None:
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

    text = Gemma4TextConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=32,
        hidden_size_per_layer_input=16,
        vocab_size=128,
        vocab_size_per_layer_input=128,
        num_kv_shared_layers=0,
        layer_types=["sliding_attention", "full_attention"] * 2,
        tie_word_embeddings=False,
    )
    path = tempfile.mkdtemp()
    config = Gemma4Config(text_config=text, vision_config=None, audio_config=None, tie_word_embeddings=False)
    Gemma4ForConditionalGeneration(config).save_pretrained(path)
    for name in VARIANTS:
        for call in ("forward", "generate"):
            done = subprocess.run([sys.executable, __file__, path, name, call], capture_output=True, text=True)
            print(done.stdout.strip() or f"{name} {call}: exit {done.returncode}: {done.stderr.strip()[-300:]}")


if __name__ == "__main__":
    child(*sys.argv[1:]) if len(sys.argv) > 1 else main()
