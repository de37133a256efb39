# Seed examples of 002_9813ec9eb9209ccc.txt (../shared/seeds): LinearMultiheadAttention as a drop-in for
# torch.nn.MultiheadAttention. The README leaves embed_dim, num_heads, query, key, value undefined; they are set here.
import torch
embed_dim, num_heads = 64, 8
query = key = value = torch.randn(100, 2, embed_dim)   # (seq, batch, embed): nn.MultiheadAttention's default layout

multihead_attn = torch.nn.MultiheadAttention(embed_dim, num_heads)
attn_output, attn_output_weights = multihead_attn(query, key, value)

from efficient_attention_nb import LinearMultiheadAttention
multihead_attn = LinearMultiheadAttention(embed_dim, num_heads)
attn_output, attn_output_weights = multihead_attn(query, key, value)

# added: check the shapes (weights are over the proj_k=128 projected positions)
assert attn_output.shape == (100, 2, embed_dim) and attn_output_weights.shape == (2, 100, 128)

query = key = value = torch.randn(512, 2, embed_dim)
multihead_attn = LinearMultiheadAttention(embed_dim, num_heads, seq_len=512, proj_k=256, param_sharing='layerwise')
attn_output, attn_output_weights = multihead_attn(query, key, value)
assert attn_output.shape == (512, 2, embed_dim) and attn_output_weights.shape == (2, 512, 256)
