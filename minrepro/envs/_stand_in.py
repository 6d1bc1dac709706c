"""Write a local stand-in for a hub model: `python _stand_in.py MODEL_ID DEST`.

Run by an environment's own python (it needs only transformers and tokenizers). The stand-in has the
published config and random weights, and a byte-level BPE tokenizer trained on a few sentences: enough for
tests that compare a model with itself (offload against no offload), not for tests of what it says.
"""

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, GPT2Config

CONFIGS = {"gpt2": GPT2Config}  # the defaults of GPT2Config are gpt2's published config
CORPUS = [
    "Four score and seven years ago our fathers brought forth on this continent a new nation.",
    "The quick brown fox jumps over the lazy dog. Hello world!",
]
EOS = "<|endoftext|>"


def tokenizer(dest: Path) -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(vocab_size=400, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tok.save(str(dest / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOS,
        "eos_token": EOS,
        "unk_token": EOS,
        "model_max_length": 1024,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2))


def main(model_id: str, dest: str) -> None:
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(CONFIGS[model_id]()).save_pretrained(out)
    tokenizer(out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
