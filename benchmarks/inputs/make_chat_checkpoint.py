"""Leave the chat job's local checkpoint: a small Gemma 4 text model, a LoRA adapter and a word-level tokenizer,
as a training run would (random weights, no download).

    python make_chat_checkpoint.py --out chat_ckpt
"""
import argparse
import os

import torch
from peft import LoraConfig, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import Gemma4ForCausalLM, Gemma4TextConfig, PreTrainedTokenizerFast

WORDS = ("how do i offload a model to disk when the card is small please explain what lora does with "
         "quantized weights and why my adapter fails to load after dispatch thanks").split()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    vocab = {w: i for i, w in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", *sorted(set(WORDS))])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>",
                                        eos_token="<eos>", unk_token="<unk>",
                                        model_input_names=["input_ids", "attention_mask"])
    tokenizer.save_pretrained(args.out)
    torch.manual_seed(0)
    config = Gemma4TextConfig(
        vocab_size=len(vocab), vocab_size_per_layer_input=len(vocab), hidden_size=64, intermediate_size=128,
        num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=32,
        hidden_size_per_layer_input=16, num_kv_shared_layers=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        layer_types=["sliding_attention", "full_attention"] * 2)
    model = Gemma4ForCausalLM(config)
    model.save_pretrained(os.path.join(args.out, "base"))
    get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
                   ).save_pretrained(os.path.join(args.out, "adapter"))


if __name__ == "__main__":
    main()
