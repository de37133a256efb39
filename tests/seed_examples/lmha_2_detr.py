# The seed's Linear-DETR use (002_9813ec9eb9209ccc.txt), written so it runs: the seed passes seq_len/proj_k to
# nn.MultiheadAttention in its encoder line (a TypeError); here both layers use LinearMultiheadAttention.
import torch
from torch import nn
from efficient_attention_nb import LinearMultiheadAttention

d_model, nhead, dropout = 64, 8, 0.1
bs, c, h, w = 2, d_model, 6, 7
num_queries = 10

enc = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=128, dropout=dropout)
enc.self_attn = LinearMultiheadAttention(d_model, nhead, dropout=dropout, seq_len=w*h, proj_k=64)
dec = nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward=128, dropout=dropout)
dec.self_attn = LinearMultiheadAttention(d_model, nhead, dropout=dropout, seq_len=num_queries, proj_k=64)
dec.multihead_attn = LinearMultiheadAttention(d_model, nhead, dropout=dropout, seq_len=w*h, proj_k=64)

src = torch.randn(bs, c, h, w).flatten(2).permute(2, 0, 1)         # (h*w, bs, c), as DETR does
memory = enc(src)
tgt = torch.zeros(num_queries, bs, d_model)
out = dec(tgt, memory)
assert memory.shape == (h * w, bs, d_model) and out.shape == (num_queries, bs, d_model)
out.sum().backward()
