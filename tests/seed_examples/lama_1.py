# Seed example 1 of 000_a3f34e4ccb9201ba.txt (../shared/seeds), import line changed to efficient_attention_nb.
import torch
from efficient_attention_nb import LAMA

num_heads = 8      # Number of attention heads
input_dim = 768    # Dimension of each tokens hidden representation
batch_size = 16    # Number of sentences/documents in the mini-batch
max_seq_len = 100  # Maximum length of the input sequence

# Create a random input sequence
inputs = torch.randn(batch_size, max_seq_len, input_dim)  

# Initialize the attention mechanism
lama = LAMA(num_heads, input_dim)

output = lama(inputs)
assert output.size() == (batch_size, num_heads, max_seq_len)
