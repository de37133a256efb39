# Seed example 3 of 001_0b04d06d8abb5479.txt (../shared/seeds), import line changed to efficient_attention_nb.
import torch
from efficient_attention_nb import LinformerSelfAttention

attn = LinformerSelfAttention(
    dim = 512,
    seq_len = 4096,
    heads = 8,
    k = 256,
    one_kv_head = True,
    share_kv = True
)

x = torch.randn(1, 4096, 512)
attn(x) # (1, 4096, 512)

# added: check what the seed promises
out = attn(x)
assert out.shape == (1, 4096, 512)
