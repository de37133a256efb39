"Context parallelism on gloo: 2 and 3 CPU processes give the single process's outputs and gradients (float64)."
import os, tempfile
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from efficient_attention_nb import causal_linear_attention
from efficient_attention_nb.delta_rule import delta_rule_attention
from efficient_attention_nb.packing import context_parallel_linear_attention, context_parallel_delta_rule

def _worker(rank:int, world:int, path:str, bounds:list):
    dist.init_process_group('gloo', init_method=f'file://{path}', rank=rank, world_size=world)
    torch.set_num_threads(1)
    gw = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=gw, dtype=torch.float64).requires_grad_()
    q, k, v, S0 = r(3, 2, 37, 4), r(3, 2, 37, 4), r(3, 2, 37, 3), r(3, 2, 4, 3)
    z0 = torch.rand(3, 2, 4, generator=gw, dtype=torch.float64).requires_grad_()
    beta = torch.rand(3, 2, 37, generator=gw, dtype=torch.float64).requires_grad_()
    lg = F.logsigmoid(torch.randn(3, 2, 37, generator=gw, dtype=torch.float64) + 2).requires_grad_()
    kn = F.normalize(k, dim=-1)
    keep = torch.ones(3, 37, dtype=torch.bool); keep[1, 20] = keep[2, 0] = False
    lo, hi = bounds[rank], bounds[rank + 1]
    part = lambda x: x[:, :, lo:hi]
    ins = (q, k, v, beta, lg, S0, z0)
    cases = [(lambda: context_parallel_linear_attention(part(q), part(k), part(v), initial_state=(S0, z0), chunk_size=4,
                                                        mask=keep[:, lo:hi], return_state=True),
              lambda: causal_linear_attention(q, k, v, initial_state=(S0, z0), mask=keep, chunk_size=4,
                                              return_state=True))]
    for g in (None, lg):
        cases.append((lambda g=g: context_parallel_delta_rule(part(q), part(kn), part(v), part(beta),
                                                              g=None if g is None else part(g), initial_state=S0,
                                                              chunk_size=4, return_state=True),
                      lambda g=g: delta_rule_attention(q, kn, v, beta, g=g, initial_state=S0, chunk_size=4,
                                                       return_state=True)))
    for cp, single in cases:
        (out, st), (ref, ref_st) = cp(), single()
        torch.testing.assert_close(out, part(ref))
        for a, b in zip(st, ref_st): torch.testing.assert_close(a, b)       # the state after the whole sequence
        w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=ref.dtype)
        grad = lambda y: torch.autograd.grad(y, ins, allow_unused=True, retain_graph=True)
        mine, full = grad((out * part(w)).sum()), grad((ref * w).sum())
        for a, b in zip(mine[:5], full[:5]):
            if b is not None: torch.testing.assert_close(part(a), part(b))
        for a, b in zip(mine[5:], full[5:]):
            if b is not None:
                a = a.contiguous(); dist.all_reduce(a); torch.testing.assert_close(a, b)   # summed over the ranks
    dist.destroy_process_group()

@pytest.mark.parametrize('bounds', [[0, 19, 37], [0, 1, 25, 37]])
def test_context_parallel_matches_one_process(bounds):
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_worker, args=(len(bounds) - 1, os.path.join(tmp, 'rendezvous'), bounds),
                           nprocs=len(bounds) - 1, start_method='fork')

def _packed_worker(rank:int, world:int, path:str, bounds:list, cu:list):
    "Packed documents over the ranks: outputs, per-document final states and gradients against one process."
    dist.init_process_group('gloo', init_method=f'file://{path}', rank=rank, world_size=world)
    torch.set_num_threads(1)
    gw, D = torch.Generator().manual_seed(0), len(cu) - 1
    r = lambda *s: torch.randn(*s, generator=gw, dtype=torch.float64).requires_grad_()
    q, k, v, S0, z0 = r(1, 2, 37, 4), r(1, 2, 37, 4), r(1, 2, 37, 3), r(D, 2, 4, 3), r(D, 2, 4)
    beta = torch.rand(1, 2, 37, generator=gw, dtype=torch.float64).requires_grad_()
    lg = F.logsigmoid(torch.randn(1, 2, 37, generator=gw, dtype=torch.float64) + 2).requires_grad_()
    kn, cu, (lo, hi) = F.normalize(k, dim=-1), torch.tensor(cu), bounds[rank:rank + 2]
    keep = torch.ones(1, 37, dtype=torch.bool); keep[0, 20] = False
    part = lambda x: None if x is None else x[:, :, lo:hi]
    one = lambda s: s if isinstance(s, torch.Tensor) else torch.cat((s[0], s[1][..., None]), -1)   # [S | z]
    kw = dict(cu_seqlens=cu, chunk_size=4, return_state=True)
    cases = [(lambda: context_parallel_linear_attention(part(q), part(k), part(v), initial_state=(S0, z0.abs()),
                                                        mask=keep[:, lo:hi], **kw),
              lambda: causal_linear_attention(q, k, v, initial_state=(S0, z0.abs()), mask=keep, **kw))]
    for g in (None, lg):
        cases.append((lambda g=g: context_parallel_delta_rule(part(q), part(kn), part(v), part(beta), g=part(g),
                                                              initial_state=S0, **kw),
                      lambda g=g: delta_rule_attention(q, kn, v, beta, g=g, initial_state=S0, **kw)))
    for cp, single in cases:
        (out, st), (ref, ref_st) = cp(), single()
        st, ref_st = one(st), one(ref_st)
        torch.testing.assert_close(out, part(ref)); torch.testing.assert_close(st, ref_st)
        w, ws = (torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=x.dtype) for x in (ref, ref_st))
        grad = lambda y: torch.autograd.grad(y, (q, k, v, beta, lg, S0, z0), allow_unused=True, retain_graph=True)
        mine = grad((out * part(w)).sum() + (st * ws).sum() / world)       # every rank holds all the final states
        full = grad((ref * w).sum() + (ref_st * ws).sum())
        for a, b in zip(mine[:5], full[:5]):
            if b is not None: torch.testing.assert_close(part(a), part(b))
        for a, b in zip(mine[5:], full[5:]):
            if b is not None:
                a = a.contiguous(); dist.all_reduce(a); torch.testing.assert_close(a, b)
    dist.destroy_process_group()

@pytest.mark.parametrize('bounds,cu', [([0, 19, 37], [0, 3, 17, 19, 30, 31, 37]),     # a start at the cut
                                       ([0, 19, 37], [0, 1, 5, 13, 23, 37]),          # one document over the cut
                                       ([0, 1, 25, 37], [0, 30, 37]),                 # one over all three parts
                                       ([0, 1, 25, 37], [0, 1, 2, 26, 37])])          # starts at both cuts
def test_context_parallel_packed_matches_one_process(bounds, cu):
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_packed_worker, args=(len(bounds) - 1, os.path.join(tmp, 'rendezvous'), bounds, cu),
                           nprocs=len(bounds) - 1, start_method='fork')
