# Seed example 1 of 003_87d2496c0972f928.txt (../shared/seeds), import line changed to efficient_attention_nb, TensorFlow tensors -> torch.
import torch
from efficient_attention_nb import CompositionalAttention

attn = CompositionalAttention(
    dim = 1024,            # input dimension
    dim_head = 64,         # dimension per attention 'head' - head is now either search or retrieval
    num_searches = 8,      # number of searches
    num_retrievals = 2,    # number of retrievals
    dropout = 0.1,          # dropout of attention of search and retrieval
)

tokens = torch.rand(1, 512, 1024)  # tokens
mask = torch.ones(1, 512, dtype=torch.bool)  # mask

out = attn(tokens, mask = mask) # (1, 512, 1024)

# added: check what the seed promises
assert out.shape == (1, 512, 1024)
