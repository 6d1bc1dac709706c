#!/usr/bin/env python
"""Family AB, explore's two-GPU row `index is on cuda:0` (Gemma4TextScaledWordEmbedding.forward): what the load
exercised, before the forward fails. A tiny Gemma 4 (the finding's config) on two GPUs, loaded like the finding
(``--case finding``: a base at ``{"": 1, one down_proj: "cpu"}``, PEFT's redispatch under
``{0: 200KB, 1: 3MB, cpu: 1MB}``) or like explore's placement control (``--case control``: ``{"": 0, layers.1:
"cpu"}``, PEFT's redispatch with no budget). Prints, as JSON lines: the map PEFT inferred, every module that
carries an accelerate hook with its execution device, where the embeddings' weights are, then the forward's
outcome. ``--move-ids`` puts the ids on each embedding's device first (a user's workaround; says whether the
embedding is all that fails)."""

import argparse
import json
import tempfile
import traceback

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

TEXT = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    global_head_dim=64,
    sliding_window=512,
    hidden_size_per_layer_input=64,
    vocab_size=128,
    vocab_size_per_layer_input=128,
    final_logit_softcapping=30.0,
    num_kv_shared_layers=2,
    use_double_wide_mlp=False,
    layer_types=["sliding_attention", "full_attention"] * 2,
)
CASES = {
    "finding": ({"": 1, "model.language_model.layers.3.mlp.down_proj": "cpu"}, {0: "200KB", 1: "3MB", "cpu": "1MB"}),
    "control": ({"": 0, "model.language_model.layers.1": "cpu"}, None),
}


def emit(**record):
    print(json.dumps(record, default=str), flush=True)


def hooks(model):
    for name, module in model.named_modules():
        # the module's own attribute: PeftModel forwards a missing attribute to its base, so getattr would list the
        # base's hook under the PeftModel and its `base_model` too (the 2026-11-26 print did)
        hook = module.__dict__.get("_hf_hook")
        if hook is None:
            continue
        inner = getattr(hook, "hooks", [hook])
        yield (
            name,
            [
                (
                    type(h).__name__,
                    str(getattr(h, "execution_device", None)),
                    getattr(h, "offload", None),
                    getattr(h, "io_same_device", None),
                )
                for h in inner
            ],
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="finding")
    parser.add_argument("--move-ids", action="store_true")
    args = parser.parse_args()
    if torch.cuda.device_count() < 2:  # say so on a box with one GPU, instead of failing
        emit(step="skipped", why=f"needs two GPUs; {torch.cuda.device_count()} visible")
        return
    base_map, budget = CASES[args.case]
    root = tempfile.mkdtemp()
    torch.manual_seed(0)
    config = Gemma4Config(
        text_config=Gemma4TextConfig(**TEXT),
        audio_config=Gemma4AudioConfig(
            hidden_size=64, num_hidden_layers=1, num_attention_heads=2, use_clipped_linears=True, output_proj_dims=64
        ),
    )
    model = Gemma4ForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(root + "/base")
    get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules=["o_proj", "down_proj"], init_lora_weights=False)
    ).save_pretrained(root + "/adapter")
    del model
    base = Gemma4ForConditionalGeneration.from_pretrained(
        root + "/base", device_map=base_map, dtype=torch.bfloat16, offload_folder=tempfile.mkdtemp()
    )
    emit(step="base loaded", hf_device_map=base.hf_device_map)
    kwargs = {"max_memory": budget} if budget else {}
    model = PeftModel.from_pretrained(base, root + "/adapter", **kwargs)
    inner = model.get_base_model()
    emit(step="peft loaded", hf_device_map=getattr(inner, "hf_device_map", None))
    emit(step="hooks", modules=dict(hooks(model)))
    lm = inner.model.language_model
    emit(
        step="embeddings",
        embed_tokens=str(lm.embed_tokens.weight.device),
        embed_tokens_per_layer=str(lm.embed_tokens_per_layer.weight.device),
        hooked={
            n: "_hf_hook" in m.__dict__
            for n, m in [
                ("embed_tokens", lm.embed_tokens),
                ("embed_tokens_per_layer", lm.embed_tokens_per_layer),
                ("language_model", lm),
                ("model", inner.model),
                ("root", inner),
            ]
        },
    )
    ids = torch.tensor([[2, 3, 4, 5]], device=0)
    if args.move_ids:
        for module in (lm.embed_tokens, lm.embed_tokens_per_layer):
            module.register_forward_pre_hook(lambda m, a: (a[0].to(m.weight.device), *a[1:]))
    try:
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        emit(step="forward", outcome="pass", logits_device=str(logits.device))
    except Exception as exc:  # the outcome is the point: the frames say which forward met which device
        frames = traceback.extract_tb(exc.__traceback__)[-6:]
        emit(
            step="forward",
            outcome=f"{type(exc).__name__}: {str(exc).splitlines()[0]}",
            frames=[f"{f.filename.split('site-packages/')[-1]}:{f.lineno} {f.name}" for f in frames],
        )


if __name__ == "__main__":
    main()
