#!/usr/bin/env python
"""Leave the corpus' local checkpoints on disk, as a small pretraining run would: random weights at CPU scale
(50-150M parameters each), a LoRA adapter beside each, a tokenizer with a chat template, and the little data files
the corpus scripts read.

    python benchmarks/corpus/make_checkpoints.py --out /data/corpus                  # every architecture
    python benchmarks/corpus/make_checkpoints.py --out /data/corpus --arch llama,phi3

Writes, per architecture, OUT/<arch>/base (config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json), OUT/<arch>/adapter (adapter_config.json, adapter_model.safetensors) and OUT/<arch>/data
(prompts.jsonl, prompts.ids.txt, eval.jsonl, pairs.jsonl). An architecture whose three folders are complete is
skipped, so the command can be run again. Nothing is downloaded: the tokenizer is a word-level `tokenizers` model built
here, with each family's special tokens at the ids its released tokenizer has them. Build with the oldest stack you
will run the scripts on (a checkpoint saved by a newer transformers may not load in an older one)."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Common words, spread over each vocabulary (never in its first ids) so that text encodes to ids in the thousands.
WORD_TEXT = """the of and to in is was for on that with as by at from it be are this an or which his her their have has
had not but were all one two three new first more also they can who about after other time some than into only its may
what when over most many such like there so would up out them these do if no between well during through year years
he she we you i me my your our how why where then now here just very any each both few much before under while where
world city school music game team part war history river state area family country house people work life day night
way word name number water light sound place point story book road power model data answer question please
thanks hello help write short poem about explain summary list steps good bad great small large long fast slow red blue
green black white cat dog bird tree fish sea sky sun moon star earth fire wind rain snow cold warm hot today tomorrow
yesterday morning evening system user assistant code python function error test train loss step batch token prompt
reply translate french english german spanish math add sum number numbers plus minus times divided equals true false
yes no maybe because therefore however example examples capital paris london berlin rome madrid tokyo a france
"""
WORDS = list(dict.fromkeys(WORD_TEXT.lower().split()))
PUNCTUATION = list(".,!?:;'\"()[]-/+=*<>|_#") + [str(d) for d in range(10)]

LLAMA_CHAT = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '[INST] <<SYS>>\\n' + "
    "message['content'] + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'user' %}{% if not loop.first and "
    "messages[loop.index0 - 1]['role'] == 'system' %}{{ message['content'] + ' [/INST]' }}{% else %}{{ '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% endif %}{% else %}{{ ' ' + message['content'] + ' ' + eos_token }}"
    "{% endif %}{% endfor %}"
)
MISTRAL_CHAT = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] "
    "+ ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
PHI3_CHAT = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
)
GEMMA_CHAT = (
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' else "
    "message['role'] %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


@dataclass
class Arch:
    name: str
    config: dict  # the model config's own keys
    specials: dict[str, int]  # token -> id, as the released tokenizer has it
    roles: dict[str, str]  # bos/eos/unk/pad -> token
    chat_template: str
    lora: dict
    markers: tuple[str, ...] = ()  # chat markers its template writes that are plain text, not special tokens
    generation: dict = field(default_factory=dict)
    tokenizer_size: int | None = None  # the tokenizer's own size where it is smaller than the embedding


def _llama() -> Arch:
    return Arch(
        "llama",
        dict(
            model_type="llama",
            vocab_size=32000,
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=8,
            num_attention_heads=12,
            num_key_value_heads=4,
            max_position_embeddings=2048,
            rope_theta=10000.0,
            rms_norm_eps=1e-5,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
            tie_word_embeddings=False,
        ),
        {"<unk>": 0, "<s>": 1, "</s>": 2},
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"},
        LLAMA_CHAT,
        dict(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
        markers=("[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"),
    )


def _mistral() -> Arch:
    specials = {"<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4}
    specials.update({f"[control_{i}]": i for i in range(5, 771)})  # v0.3 keeps ids 5-770 for control tokens
    return Arch(
        "mistral",
        dict(
            model_type="mistral",
            vocab_size=32768,
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=8,
            num_attention_heads=12,
            num_key_value_heads=4,
            head_dim=64,
            max_position_embeddings=4096,
            sliding_window=512,
            rope_theta=1000000.0,
            rms_norm_eps=1e-5,
            bos_token_id=1,
            eos_token_id=2,
            tie_word_embeddings=False,
        ),
        specials,
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        MISTRAL_CHAT,
        dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"]),
    )


def _qwen(version: int) -> Arch:
    specials = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
    specials.update({f"<|extra_{i}|>": 151646 + i for i in range(21)})
    if version == 3:
        specials.update({"<think>": 151667, "</think>": 151668})
    config = dict(
        vocab_size=151936,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        bos_token_id=151643,
        eos_token_id=151645,
        tie_word_embeddings=True,
    )
    if version == 2:
        config.update(model_type="qwen2", intermediate_size=1408, num_hidden_layers=8)
    else:
        config.update(model_type="qwen3", intermediate_size=1536, num_hidden_layers=10, head_dim=128)
    return Arch(
        f"qwen{version}",
        config,
        specials,
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None, "bos_token": None},
        CHATML,
        dict(r=16, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"]),
        generation={"eos_token_id": [151645, 151643], "pad_token_id": 151643},
        tokenizer_size=151669 if version == 3 else 151665,
    )


def _phi3() -> Arch:
    specials = {"<unk>": 0, "<s>": 1, "</s>": 2, "<|endoftext|>": 32000, "<|assistant|>": 32001}
    specials.update({f"<|placeholder{i}|>": 32001 + i for i in range(1, 5)})
    specials.update({"<|system|>": 32006, "<|end|>": 32007, "<|placeholder5|>": 32008, "<|placeholder6|>": 32009})
    specials["<|user|>"] = 32010
    return Arch(
        "phi3",
        dict(
            model_type="phi3",
            vocab_size=32064,
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=8,
            num_attention_heads=12,
            num_key_value_heads=12,
            max_position_embeddings=4096,
            original_max_position_embeddings=4096,
            rope_theta=10000.0,
            rms_norm_eps=1e-5,
            bos_token_id=1,
            eos_token_id=32000,
            pad_token_id=32000,
            tie_word_embeddings=False,
        ),
        specials,
        {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
        PHI3_CHAT,
        dict(r=16, lora_alpha=32, target_modules=["qkv_proj", "o_proj"]),
        generation={"eos_token_id": [32000, 32001, 32007], "pad_token_id": 32000, "bos_token_id": 1},
    )


def _gemma3() -> Arch:
    specials = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<start_of_turn>": 106, "<end_of_turn>": 107}
    return Arch(
        "gemma3",
        dict(
            model_type="gemma3_text",
            vocab_size=65536,
            hidden_size=512,
            intermediate_size=2048,
            num_hidden_layers=12,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=128,
            sliding_window=256,
            max_position_embeddings=8192,
            query_pre_attn_scalar=128,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=2,
        ),
        specials,
        {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
        GEMMA_CHAT,
        dict(r=16, lora_alpha=32, target_modules=r".*\.(q_proj|v_proj)"),
        generation={"eos_token_id": [1, 106], "pad_token_id": 0, "bos_token_id": 2},
    )


ARCHES = {
    "llama": _llama,
    "qwen2": lambda: _qwen(2),
    "qwen3": lambda: _qwen(3),
    "mistral": _mistral,
    "phi3": _phi3,
    "gemma3": _gemma3,
}


def _filler(count: int, rng: random.Random) -> list[str]:
    """Pronounceable made-up words: the rest of the vocabulary, as a pretraining tokenizer's long tail."""
    onsets = [*"bcdfghjklmnprstvwz", "br", "ch", "cl", "dr", "gr", "kr", "pl", "sh", "st", "th", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng"]
    out: list[str] = []
    seen = set(WORDS) | set(PUNCTUATION)
    while len(out) < count:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(1, 3))) + rng.choice(codas)
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


def build_tokenizer(arch: Arch):
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    size = arch.tokenizer_size or arch.config["vocab_size"]
    rng = random.Random(f"vocab-{arch.name}")
    free = [i for i in range(size) if i not in set(arch.specials.values())]
    # punctuation and digits early, the common words past the first thousand ids, as in a real BPE vocabulary
    vocab = dict(arch.specials)
    vocab.update(zip(PUNCTUATION, free[260:], strict=False))
    words = [w for w in (*arch.markers, *WORDS) if w not in vocab]
    taken = set(vocab.values())
    word_ids = rng.sample([i for i in free if i >= 1000 and i not in taken], len(words))
    vocab.update(zip(words, word_ids, strict=True))
    taken = set(vocab.values())
    rest = [i for i in free if i not in taken]
    vocab.update(zip(_filler(len(rest), rng), rest, strict=True))
    unk = arch.roles.get("unk_token") or "<|endoftext|>"
    tok = Tokenizer(WordLevel(vocab=vocab, unk_token=unk))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.add_special_tokens(list(arch.specials))
    tok.add_tokens(list(arch.markers))
    roles = {k: v for k, v in arch.roles.items() if v is not None}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=arch.chat_template, **roles)
    fast.model_max_length = arch.config["max_position_embeddings"]
    return fast


def build_model(arch: Arch):
    from transformers import AutoConfig, AutoModelForCausalLM

    params = dict(arch.config)
    config = AutoConfig.for_model(params.pop("model_type"), **params)
    config.dtype = "bfloat16"
    return AutoModelForCausalLM.from_config(config)


def write_data(tokenizer, arch: Arch, out: Path) -> None:
    """The files the scripts read: requests of prompt ids, one prompt of ids per line, an eval set with labels, and
    prompt/completion pairs to score. Ids come from the tokenizer, so they reach far into the vocabulary."""
    rng = random.Random(f"data-{arch.name}")
    out.mkdir(parents=True, exist_ok=True)

    def sentence(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    with open(out / "prompts.jsonl", "w") as fh:
        for i in range(4):
            fh.write(
                json.dumps({"id": f"req-{i}", "prompt_ids": ids(sentence(rng.randint(5, 12))), "max_new_tokens": 4})
                + "\n"
            )
    with open(out / "prompts.ids.txt", "w") as fh:
        fh.write("# one prompt per line: space-separated token ids\n")
        for _ in range(4):
            fh.write(" ".join(map(str, ids(sentence(rng.randint(6, 14))))) + "\n")
    with open(out / "eval.jsonl", "w") as fh:
        for _ in range(6):
            text = sentence(rng.randint(12, 24))
            fh.write(json.dumps({"text": text, "input_ids": ids(text)}) + "\n")
    with open(out / "pairs.jsonl", "w") as fh:
        for _ in range(4):
            prompt = sentence(rng.randint(5, 9))
            fh.write(json.dumps({"prompt": prompt, "chosen": sentence(4), "rejected": sentence(4)}) + "\n")


def build(name: str, out: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    arch = ARCHES[name]()
    where = out / name
    if all(
        (where / sub / mark).exists()
        for sub, mark in (("base", "tokenizer.json"), ("adapter", "adapter_config.json"), ("data", "pairs.jsonl"))
    ):
        print(f"{name}: already in {where}")
        return
    began = time.monotonic()
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = build_model(arch)
    finally:
        torch.set_default_dtype(previous)
    for key, value in arch.generation.items():
        setattr(model.generation_config, key, value)
    tokenizer = build_tokenizer(arch)
    for sub in ("base", "adapter"):
        shutil.rmtree(where / sub, ignore_errors=True)  # a half-written one from an interrupted build
    model.save_pretrained(where / "base")
    tokenizer.save_pretrained(where / "base")
    lora = LoraConfig(lora_dropout=0.05, init_lora_weights=False, task_type="CAUSAL_LM", **arch.lora)
    peft_model = get_peft_model(model, lora)
    peft_model.peft_config["default"].base_model_name_or_path = str(where / "base")
    peft_model.save_pretrained(where / "adapter")
    write_data(tokenizer, arch, where / "data")
    base_count = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    print(
        f"{name}: {base_count / 1e6:.0f}M parameters, vocab {arch.config['vocab_size']}, in {where} "
        f"({time.monotonic() - began:.0f} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the directory the checkpoints go under, one folder per arch")
    parser.add_argument(
        "--arch", default=",".join(ARCHES), help=f"comma-separated, from: {', '.join(ARCHES)} (default: all)"
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.arch.split(",") if n.strip()]
    unknown = [n for n in names if n not in ARCHES]
    if unknown:
        parser.error(f"unknown arch {', '.join(unknown)}; choose from {', '.join(ARCHES)}")
    out = Path(args.out).resolve()
    for name in names:
        build(name, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
