"Packed documents (`cu_seqlens`): every public form equals running each document alone, outputs, states and gradients."
import pytest
import torch
import torch.nn.functional as F
from efficient_attention_nb import causal_linear_attention
from efficient_attention_nb.linear_attention import LinearAttentionState
from efficient_attention_nb.delta_rule import delta_rule_attention, delta_rule_recurrent

CU = torch.tensor([0, 1, 5, 13, 14, 23])    # lengths 1, 4 (one chunk of 4), 8, 1, 9 (ragged end)

def _inputs(n=23, h=2, d=5, e=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(1, h, n, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    v = torch.randn(1, h, n, e, generator=g, dtype=torch.float64, requires_grad=True)
    beta = torch.rand(1, h, n, generator=g, dtype=torch.float64, requires_grad=True)
    lg = (-torch.rand(1, h, n, generator=g, dtype=torch.float64)).requires_grad_()
    return q, k, v, beta, lg

def _docs(cu): return list(zip(cu[:-1].tolist(), cu[1:].tolist()))

def _grads(out, inputs, seed=1):
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    return torch.autograd.grad((out * w).sum(), inputs, retain_graph=True)

@pytest.mark.parametrize('chunk_size', [1, 4, 64])
@pytest.mark.parametrize('with_state', [False, True])
def test_linear_attention_packed_equals_alone(chunk_size, with_state):
    q, k, v, _, _ = _inputs()
    D, g = len(CU) - 1, torch.Generator().manual_seed(2)
    S0 = (LinearAttentionState(torch.randn(D, 2, 5, 3, generator=g, dtype=torch.float64),
                               torch.rand(D, 2, 5, generator=g, dtype=torch.float64)) if with_state else None)
    for cu in (CU, CU.int()):
        out, st = causal_linear_attention(q, k, v, cu_seqlens=cu, chunk_size=chunk_size, initial_state=S0,
                                          return_state=True)
        alone, states = [], []
        for i, (s, t) in enumerate(_docs(cu)):
            init = None if S0 is None else LinearAttentionState(S0.kv[i:i + 1], S0.k_sum[i:i + 1])
            o, si = causal_linear_attention(q[:, :, s:t], k[:, :, s:t], v[:, :, s:t], chunk_size=chunk_size,
                                            initial_state=init, return_state=True)
            alone.append(o); states.append(si)
        ref = torch.cat(alone, 2)
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(st.kv, torch.cat([s_.kv for s_ in states]))
        torch.testing.assert_close(st.k_sum, torch.cat([s_.k_sum for s_ in states]))
        for a, b in zip(_grads(out, (q, k, v)), _grads(ref, (q, k, v))): torch.testing.assert_close(a, b)

def test_linear_attention_packed_one_document_and_mask():
    q, k, v, _, _ = _inputs(n=11)
    torch.testing.assert_close(causal_linear_attention(q, k, v, cu_seqlens=torch.tensor([0, 11]), chunk_size=4),
                               causal_linear_attention(q, k, v, chunk_size=4))
    keep = torch.ones(1, 11, dtype=torch.bool); keep[0, 3] = False
    cu = torch.tensor([0, 6, 11])
    out = causal_linear_attention(q, k, v, mask=keep, cu_seqlens=cu, chunk_size=4)
    ref = torch.cat([causal_linear_attention(q[:, :, s:t], k[:, :, s:t], v[:, :, s:t], mask=keep[:, s:t], chunk_size=4)
                     for s, t in _docs(cu)], 2)
    torch.testing.assert_close(out, ref)

@pytest.mark.parametrize('chunk_size', [1, 4, 64])
@pytest.mark.parametrize('gate', [False, True])
def test_delta_rule_packed_equals_alone(chunk_size, gate):
    q, k, v, beta, lg = _inputs()
    kn = F.normalize(k, dim=-1)
    g = lg if gate else None
    S0 = torch.randn(len(CU) - 1, 2, 5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out, st = delta_rule_attention(q, kn, v, beta, g=g, chunk_size=chunk_size, initial_state=S0, return_state=True,
                                   cu_seqlens=CU)
    alone, states = [], []
    for i, (s, t) in enumerate(_docs(CU)):
        o, si = delta_rule_recurrent(q[:, :, s:t], kn[:, :, s:t], v[:, :, s:t], beta[:, :, s:t],
                                     None if g is None else g[:, :, s:t], initial_state=S0[i:i + 1])
        alone.append(o); states.append(si)
    ref = torch.cat(alone, 2)
    torch.testing.assert_close(out, ref); torch.testing.assert_close(st, torch.cat(states))
    inputs = (q, k, v, beta) + ((lg,) if gate else ())
    for a, b in zip(_grads(out, inputs), _grads(ref, inputs)): torch.testing.assert_close(a, b)

@pytest.mark.parametrize('bad, error, msg', [
    (torch.tensor([1, 5, 23]), ValueError, 'cu_seqlens must start at 0, got 1'),
    (torch.tensor([0, 5, 22]), ValueError, 'cu_seqlens must end at n=23'),
    (torch.tensor([0, 9, 5, 23]), ValueError, 'cu_seqlens must increase strictly'),
    (torch.tensor([0., 23.]), TypeError, 'got dtype torch.float32'),
    (torch.tensor([[0, 23]]), ValueError, 'got shape (1, 2)'),
    ([0, 23], TypeError, 'got list'),
])
def test_bad_cu_seqlens(bad, error, msg):
    q, k, v, beta, _ = _inputs()
    with pytest.raises(error, match='cu_seqlens') as info: causal_linear_attention(q, k, v, cu_seqlens=bad)
    assert msg in str(info.value)
    with pytest.raises(error, match='cu_seqlens') as info:
        delta_rule_attention(q, F.normalize(k, dim=-1), v, beta, cu_seqlens=bad)
    assert msg in str(info.value)

def test_packed_batch_and_backend_errors():
    q, k, v, beta, _ = _inputs()
    q2, k2, v2 = (torch.cat((t, t)) for t in (q, k, v))
    with pytest.raises(ValueError, match='the batch must be 1, got 2'):
        causal_linear_attention(q2, k2, v2, cu_seqlens=CU)
    with pytest.raises(ValueError, match="backend='auto', 'torch' or 'triton', got backend='tiled'"):
        causal_linear_attention(q, k, v, cu_seqlens=CU, backend='tiled')           # the CPU tile kernel takes no offsets
    with pytest.raises(ValueError, match=r'initial_state.kv must have shape \(5'):
        causal_linear_attention(q, k, v, cu_seqlens=CU, initial_state=LinearAttentionState(
            torch.zeros(1, 2, 5, 3, dtype=q.dtype), torch.zeros(1, 2, 5, dtype=q.dtype)))
