# Seed example 5 of 004_6b073dfd3fbdb6d9.txt (../shared/seeds), import line changed to efficient_attention_nb, .cuda() dropped.
from efficient_attention_nb import LinearAttentionTransformerLM, LinformerContextSettings

settings = LinformerContextSettings(
  seq_len = 2048,
  k = 256
)

dec = LinearAttentionTransformerLM(
    num_tokens = 20000,
    dim = 512,
    heads = 8,
    depth = 6,
    max_seq_len = 4096,
    causal = True,
    context_linformer_settings = settings,
    receives_context = True
)

# added: check what the seed promises
import torch
ctx = torch.randn(1, 2048, 512)
tgt = torch.randint(0, 20000, (1, 1024))
assert dec(tgt, context=ctx).shape == (1, 1024, 20000)
