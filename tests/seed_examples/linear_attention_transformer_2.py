# Seed example 2 of 004_6b073dfd3fbdb6d9.txt (../shared/seeds), import line changed to efficient_attention_nb, .cuda() dropped.
import torch
from efficient_attention_nb import LinearAttentionTransformer

model = LinearAttentionTransformer(
    dim = 512,
    heads = 8,
    depth = 1,
    max_seq_len = 8192,
    n_local_attn_heads = 4
)

x = torch.randn(1, 8192, 512)
model(x) # (1, 8192, 512)

# added: check what the seed promises
out = model(x)
assert out.shape == (1, 8192, 512)
