# Seed example 3 of 004_6b073dfd3fbdb6d9.txt (../shared/seeds), import line changed to efficient_attention_nb, .cuda() dropped.
import torch
from efficient_attention_nb import LinearAttentionTransformerLM

enc = LinearAttentionTransformerLM(
    num_tokens = 20000,
    dim = 512,
    heads = 8,
    depth = 6,
    max_seq_len = 4096,
    reversible = True,
    n_local_attn_heads = 4,
    return_embeddings = True
)

dec = LinearAttentionTransformerLM(
    num_tokens = 20000,
    dim = 512,
    heads = 8,
    depth = 6,
    causal = True,
    max_seq_len = 4096,
    reversible = True,
    receives_context = True,
    n_local_attn_heads = 4
)

src = torch.randint(0, 20000, (1, 4096))
src_mask = torch.ones_like(src).bool()

tgt = torch.randint(0, 20000, (1, 4096))
tgt_mask = torch.ones_like(tgt).bool()

context = enc(src, input_mask = src_mask)
logits = dec(tgt, context = context, input_mask = tgt_mask, context_mask = src_mask)

# added: check what the seed promises
assert context.shape == (1, 4096, 512) and logits.shape == (1, 4096, 20000)
