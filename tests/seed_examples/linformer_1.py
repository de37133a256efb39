# Seed example 1 of 001_0b04d06d8abb5479.txt (../shared/seeds), import line changed to efficient_attention_nb.
import torch
from efficient_attention_nb import LinformerLM

model = LinformerLM(
    num_tokens = 20000,
    dim = 512,
    seq_len = 4096,
    depth = 12,
    heads = 8,
    k = 256,               # this is the k that the key/values are projected to along the sequence dimension
    one_kv_head = True,    # share one key/value head across all heads
    share_kv = False       # share the same projectoin for keys and values
)

x = torch.randint(0, 20000, (1, 4096))
model(x) # (1, 4096, 20000)

# added: check what the seed promises
out = model(x)
assert out.shape == (1, 4096, 20000)
