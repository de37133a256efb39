"""Property tests of the linear attention transformer on random configurations (the chapter's cells test fixed ones).

Token-level causality, padding inertness, decoding = teacher forcing (from the start and after a parallel prefill),
state_dict round trip, empty batches, and hypothesis-drawn option combinations. Small sizes, one thread.

Round trips of the functions meant to be used together: a layer's (and the LM's) `prefill` + `step`s equal its
parallel forward, with linear and delta-rule global heads; an encoder's output as a decoder's context gives the same
logits decoded step by step as in parallel, padded context positions inert, and `generate` with that context equals
greedy decoding by the parallel forward.
"""
import io

import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck

from efficient_attention_nb import (LinearAttentionTransformerLM, LinearAttentionTransformer, LinformerSettings,
                                   LinformerContextSettings, LocalGlobalAttention)

torch.set_num_threads(1)

OPTIONS = {
    'global': {},
    'local': dict(n_local_attn_heads=2),
    'local per layer': dict(n_local_attn_heads=(4, 0)),
    'blindspot': dict(n_local_attn_heads=(1, 3), blindspot_size=5),
    'shift_tokens': dict(shift_tokens=True),
    'axial': dict(attend_axially=True, n_local_attn_heads=1),
    'reversible': dict(reversible=True, n_local_attn_heads=2),
    'ff': dict(ff_chunks=4, ff_glu=True, emb_dim=8, dim_head=6),
}


def _lm(causal=True, **opts):
    torch.manual_seed(0)
    return LinearAttentionTransformerLM(num_tokens=23, dim=32, heads=4, depth=2, max_seq_len=40, causal=causal,
                                        local_attn_window_size=4, **opts).eval()


@pytest.mark.parametrize('name', list(OPTIONS))
def test_lm_later_tokens_do_not_change_earlier_logits(name):
    lm, g = _lm(**OPTIONS[name]), torch.Generator().manual_seed(1)
    tok = torch.randint(0, 23, (2, 29), generator=g)
    with torch.no_grad():
        ref = lm(tok)
        for t in (0, 4, 5, 17, 27):
            tok2 = tok.clone(); tok2[:, t + 1:] = torch.randint(0, 23, (2, 28 - t), generator=g)
            out = lm(tok2)
            torch.testing.assert_close(out[:, :t + 1], ref[:, :t + 1], rtol=0, atol=1e-5)
            assert (out[:, t + 1:] - ref[:, t + 1:]).abs().max() > 0


@pytest.mark.parametrize('name, causal', [(nm, c) for c in (False, True) for nm in OPTIONS] + [('linformer', False)])
def test_lm_padded_tokens_are_inert(name, causal):
    opts = dict(linformer_settings=LinformerSettings(k=8)) if name == 'linformer' else OPTIONS[name]
    if not causal and name == 'blindspot': opts = dict(n_local_attn_heads=2)
    lm, g = _lm(causal=causal, **opts), torch.Generator().manual_seed(2)
    mask = torch.tensor([[True] * 21, [False] * 3 + [True] * 12 + [False] * 6])
    tok = torch.randint(0, 23, (2, 21), generator=g)
    tok2 = torch.where(mask, tok, torch.randint(0, 23, (2, 21), generator=g))
    with torch.no_grad():
        torch.testing.assert_close(lm(tok2, input_mask=mask)[mask], lm(tok, input_mask=mask)[mask], rtol=0, atol=1e-4)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 23), heads_local=st.integers(0, 4), window=st.integers(1, 6), blind=st.integers(1, 4),
       shift=st.booleans(), axial=st.booleans(), rev=st.booleans(), chunks=st.integers(1, 3), delta=st.booleans(),
       seed=st.integers(0, 2**16))
def test_decoding_equals_teacher_forcing(n, heads_local, window, blind, shift, axial, rev, chunks, delta, seed):
    if blind > 1 and (delta or heads_local == 0 or window < blind - 1): blind = 1
    torch.manual_seed(seed)
    lm = LinearAttentionTransformerLM(num_tokens=11, dim=16, heads=4, depth=2, max_seq_len=24, causal=True,
                                      n_local_attn_heads=heads_local, local_attn_window_size=window,
                                      blindspot_size=blind, shift_tokens=shift, attend_axially=axial, reversible=rev,
                                      ff_chunks=chunks, dim_head=None if seed % 2 else 8,
                                      global_attn='delta' if delta else 'linear').eval()
    tok = torch.randint(0, 11, (2, n), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        parallel = lm(tok)
        cache, steps = None, []
        for t in range(n):
            lg, cache = lm.step(tok[:, t], cache); steps.append(lg)
        torch.testing.assert_close(torch.stack(steps, 1), parallel, rtol=1e-4, atol=1e-4)
        n0 = 1 + seed % n                                         # a parallel prefill of n0 positions, then steps
        h, cache = lm.body.prefill(lm.embed(tok[:, :n0]))
        torch.testing.assert_close(lm.head(h), parallel[:, :n0], rtol=1e-4, atol=1e-4)
        for t in range(n0, n):
            lg, cache = lm.step(tok[:, t], cache)
            torch.testing.assert_close(lg, parallel[:, t], rtol=1e-4, atol=1e-4)


def test_state_dict_round_trip_and_training_step():
    cfg = dict(n_local_attn_heads=(2, 1), blindspot_size=3, reversible=True, shift_tokens=True, attend_axially=True)
    a = _lm(**cfg)
    torch.manual_seed(5)
    b = LinearAttentionTransformerLM(num_tokens=23, dim=32, heads=4, depth=2, max_seq_len=40, causal=True,
                                     local_attn_window_size=4, **cfg).eval()
    buf = io.BytesIO(); torch.save(a.state_dict(), buf); buf.seek(0)
    b.load_state_dict(torch.load(buf))
    tok = torch.randint(0, 23, (2, 13))
    with torch.no_grad(): torch.testing.assert_close(b(tok), a(tok), rtol=0, atol=0)
    # reversible backward gives the same gradients as ordinary autograd through the same coupling
    a.train()
    x = torch.randn(2, 13, 32, requires_grad=True)
    tr = a.transformer
    g1 = torch.autograd.grad(tr(x).square().sum(), [x, *tr.parameters()])
    coupled = tr._walk(x, lambda i, j, sub, h: sub(h))                          # the same coupling, plain autograd
    g2 = torch.autograd.grad(coupled.square().sum(), [x, *tr.parameters()])
    for u, v in zip(g1, g2): torch.testing.assert_close(u, v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('kwargs, err, msg', [
    (dict(causal=True, linformer_settings=LinformerSettings(8)), ValueError, 'linformer_settings needs causal=False'),
    (dict(n_local_attn_heads=5), ValueError, 'n_local_attn_heads must be <= 4, got 5'),
    (dict(n_local_attn_heads=-1), ValueError, 'n_local_attn_heads must be >= 0'),
    (dict(causal=True, n_local_attn_heads=2, local_attn_window_size=4, blindspot_size=9), ValueError, 'local_attn_window_size >= 8'),
    (dict(depth=0), ValueError, 'depth must be >= 1, got 0'),
    (dict(heads=3, dim_head=None), ValueError, 'dim (32) must be divisible by heads (3)'),   # dim_head=64 needs none
    (dict(ff_dropout=1.0), ValueError, 'ff_dropout must be < 1.0'),
    (dict(local_attn_window_size=0), ValueError, 'local_attn_window_size must be >= 1'),
])
def test_bad_construction(kwargs, err, msg):
    cfg = dict(num_tokens=23, dim=32, heads=4, depth=2, max_seq_len=40) | kwargs
    with pytest.raises(err, match=msg.replace('(', r'\(').replace(')', r'\)').replace('.', r'\.')):
        LinearAttentionTransformerLM(**cfg)


def test_bad_calls():
    lm = _lm(n_local_attn_heads=2)
    with pytest.raises(ValueError, match='x has 41 tokens but this LinearAttentionTransformerLM was built with max_seq_len=40'):
        lm(torch.zeros(1, 41, dtype=torch.long))
    with pytest.raises(TypeError, match='dtype torch.uint8'): lm(torch.zeros(1, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r'x must hold token ids in \[0, 23\), got values in \[0, 23\]'): lm(torch.tensor([[0, 23]]))
    with pytest.raises(TypeError, match='integer token ids'): lm(torch.zeros(1, 3))
    with pytest.raises(ValueError, match='x must have shape'): lm(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match='input_mask must have shape'): lm(torch.zeros(2, 5, dtype=torch.long), input_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match='tokens must have shape'): lm.step(torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match=r'prefill\(\) and step\(\) decode one position at a time and need causal=True'):
        LinearAttentionTransformer(32, 1, 16).step(torch.zeros(1, 32))


@pytest.mark.parametrize('name', list(OPTIONS))
def test_empty_batch(name):
    """b = 0 gives an empty output, as torch's own modules do."""
    lm = _lm(**OPTIONS[name])
    with torch.no_grad(): assert lm(torch.zeros(0, 7, dtype=torch.long)).shape == (0, 7, 23)


LAYERS = {'linear': {}, 'delta': dict(global_attn='delta'), 'blindspot': dict(blindspot_size=3)}


@pytest.mark.parametrize('kind, n_local', [(k, n) for k in LAYERS for n in (0, 2, 4)
                                           if not (k == 'blindspot' and n == 0)])   # refused: nothing covers it
def test_local_global_attention_prefill_then_steps_equal_parallel(kind, n_local):
    """LocalGlobalAttention: prefill of n0 positions, then one step per position, equals the parallel forward."""
    torch.manual_seed(3)
    attn = LocalGlobalAttention(16, heads=4, n_local_heads=n_local, window_size=3, causal=True, chunk_size=4,
                                **LAYERS[kind]).double().eval()
    x = torch.randn(2, 17, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = attn(x)
        for n0 in (1, 4, 5, 16):                                            # across window, chunk and block edges
            out, cache = attn.prefill(x[:, :n0])
            torch.testing.assert_close(out, ref[:, :n0], rtol=0, atol=1e-10)
            for t in range(n0, 17):
                o, cache = attn.step(x[:, t], cache, t)
                torch.testing.assert_close(o, ref[:, t], rtol=0, atol=1e-10)


def _enc_dec(global_attn='linear', context_settings=None):
    torch.manual_seed(6)
    enc = LinearAttentionTransformerLM(17, 16, 1, 12, 4, None, n_local_attn_heads=2, local_attn_window_size=3,
                                       return_embeddings=True).eval()
    dec = LinearAttentionTransformerLM(17, 16, 2, 24, 4, 8, True, n_local_attn_heads=1, local_attn_window_size=3,
                                       receives_context=True, global_attn=global_attn,
                                       context_linformer_settings=context_settings).eval()
    return enc, dec


@pytest.mark.parametrize('global_attn, context_settings', [('linear', None), ('delta', None),
                                                           ('linear', LinformerContextSettings(seq_len=12, k=5))])
def test_encoder_decoder_context_round_trip(global_attn, context_settings):
    """The encoder's output as the decoder's context: prefill + steps = the parallel forward; padding inert."""
    enc, dec = _enc_dec(global_attn, context_settings)
    g = torch.Generator().manual_seed(7)
    src, tgt = torch.randint(0, 17, (2, 11), generator=g), torch.randint(0, 17, (2, 13), generator=g)
    src_mask = torch.arange(11)[None] < torch.tensor([[11], [7]])                # the second source is padded
    with torch.no_grad():
        ctx = enc(src, input_mask=src_mask)
        kw = dict(context=ctx, context_mask=src_mask)
        parallel = dec(tgt, **kw)
        for n0 in (1, 6):
            h, cache = dec.body.prefill(dec.embed(tgt[:, :n0]), **kw)
            torch.testing.assert_close(dec.head(h), parallel[:, :n0], rtol=1e-4, atol=1e-4)
            for t in range(n0, 13):
                lg, cache = dec.step(tgt[:, t], cache, **kw)
                torch.testing.assert_close(lg, parallel[:, t], rtol=1e-4, atol=1e-4)
        src2 = torch.where(src_mask, src, torch.randint(0, 17, (2, 11), generator=g))  # other tokens where padded
        ctx2 = enc(src2, input_mask=src_mask)
        torch.testing.assert_close(ctx2[src_mask], ctx[src_mask], rtol=0, atol=1e-5)
        ctx2 = torch.where(src_mask[..., None], ctx2, 1e3 * torch.randn(ctx2.shape, generator=g))
        torch.testing.assert_close(dec(tgt, context=ctx2, context_mask=src_mask), parallel, rtol=0, atol=1e-4)
        assert (dec(tgt, context=ctx2) - parallel).abs().max() > 1e-3         # without the mask the padding counts


def test_generate_with_context_equals_greedy_parallel():
    enc, dec = _enc_dec()
    g = torch.Generator().manual_seed(8)
    src, prompt = torch.randint(0, 17, (2, 9), generator=g), torch.randint(0, 17, (2, 3), generator=g)
    src_mask = torch.arange(9)[None] < torch.tensor([[9], [5]])
    with torch.no_grad():
        kw = dict(context=enc(src, input_mask=src_mask), context_mask=src_mask)
        new, seq = dec.generate(prompt, 8, temperature=0., **kw), prompt
        for _ in range(8): seq = torch.cat([seq, dec(seq, **kw)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(new, seq[:, 3:])


@pytest.mark.parametrize('opts', [dict(reversible=True), dict(global_attn='delta', bucket_size=16)],
                         ids=['reversible', 'delta'])
def test_training_step_compiles_with_inductor(opts):
    "The chapter's compile check (04transforme-047z) with inductor: one graph, the eager outputs and gradients."
    import torch._dynamo
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(0, 40, (2, 40), generator=g)
    torch.manual_seed(0)
    lm = LinearAttentionTransformerLM(num_tokens=40, dim=32, heads=4, depth=1, max_seq_len=64, causal=True,
                                      n_local_attn_heads=2, local_attn_window_size=4, **opts)
    params = [p for p in lm.parameters() if p.requires_grad]
    torch._dynamo.reset()
    out_e, out_c = lm(tok), torch.compile(lm, fullgraph=True)(tok)
    torch.testing.assert_close(out_c, out_e, rtol=0, atol=1e-4)
    g_e, g_c = (torch.autograd.grad(o.square().mean(), params) for o in (out_e, out_c))
    for a, b in zip(g_c, g_e): torch.testing.assert_close(a, b, rtol=0, atol=1e-4 * (1 + b.abs().max().item()))
    torch._dynamo.reset()


def test_generate_compiled_with_context_equals_eager():
    "The chapter's decoding-in-one-graph check (04transforme-045h) for a decoder reading an encoder's context."
    import torch._dynamo
    g = torch.Generator().manual_seed(0)
    dec = LinearAttentionTransformerLM(num_tokens=40, dim=32, heads=4, depth=1, max_seq_len=48, causal=True,
                                       n_local_attn_heads=2, local_attn_window_size=4, receives_context=True).eval()
    prompt = torch.randint(0, 40, (2, 5), generator=g)
    ctx = dict(context=torch.randn(2, 7, 32, generator=g), context_mask=torch.arange(7)[None] < torch.tensor([[7], [5]]))
    eager = dec.generate(prompt, 100, temperature=0., **ctx)
    torch._dynamo.reset()
    assert torch.equal(dec.generate(prompt, 2, temperature=0., compile=True, **ctx), eager[:, :2])   # compiles
    with torch._dynamo.config.patch(error_on_recompile=True):                                  # ... and replays
        assert torch.equal(dec.generate(prompt, 64, temperature=0., compile=True, **ctx), eager[:, :64])
        assert torch.equal(dec.generate(prompt, 100, temperature=0., compile=True, **ctx), eager)  # past max_seq_len
    torch._dynamo.reset()
