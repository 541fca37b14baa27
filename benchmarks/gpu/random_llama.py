"""A random-weight Llama checkpoint of a given shape (out, hidden, layers, heads, kv heads, MLP) with the
default model's tokenizer (from the bita cache; used by benchmarks/gpu/check.sh), to time passes of bigger models: pass-cost --model OUT --adapter untrained."""
import sys, glob, os, shutil
import torch
from transformers import LlamaConfig, LlamaForCausalLM
out, hidden, layers, heads, kv, inter = sys.argv[1], *map(int, sys.argv[2:7])
tok = os.path.dirname(sorted(glob.glob("/tmp/bita-cache/**/tokenizer.json", recursive=True))[0])
cfg = LlamaConfig(vocab_size=49152, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv, intermediate_size=inter, max_position_embeddings=8192,
                  tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, dtype="bfloat16")
with torch.device(os.environ.get("DEV", "cuda")):
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(out)
for f in os.listdir(tok):
    if f.startswith("tokenizer") or f.startswith("special_tokens") or f == "chat_template.jinja":
        shutil.copy(os.path.join(tok, f), out)
print(out, sum(p.numel() for p in model.parameters()) / 1e9, "B params", os.listdir(out))
