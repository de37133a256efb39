# Seed example 4 of 004_6b073dfd3fbdb6d9.txt (../shared/seeds), import line changed to efficient_attention_nb, .cuda() dropped.
from efficient_attention_nb import LinearAttentionTransformerLM, LinformerSettings

settings = LinformerSettings(k = 256)

enc = LinearAttentionTransformerLM(
    num_tokens = 20000,
    dim = 512,
    heads = 8,
    depth = 6,
    max_seq_len = 4096,
    linformer_settings = settings
)

# added: check what the seed promises
import torch
x = torch.randint(0, 20000, (1, 4096))
assert enc(x).shape == (1, 4096, 20000)
