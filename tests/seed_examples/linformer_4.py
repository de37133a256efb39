# Seed example 4 of 001_0b04d06d8abb5479.txt (../shared/seeds), import line changed to efficient_attention_nb.
import torch
from efficient_attention_nb import LinformerSelfAttention

attn = LinformerSelfAttention(
    dim = 512,
    seq_len = 8192,
    heads = 8,
    k = 256,
    one_kv_head = True,
    share_kv = True
)

x = torch.randn(1, 2048, 512)
context = torch.randn(1, 8192, 512)
attn(x, context) # (1, 2048, 512)

# added: check what the seed promises
out = attn(x, context)
assert out.shape == (1, 2048, 512)
