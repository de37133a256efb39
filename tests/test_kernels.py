"""The Triton kernels' checks that take too long for the GPU chapter's cells: every kernel compiled for an H100 without
one, and Inductor (not only `aot_eager`) through the custom operators of linear attention and the delta rule.

On CPU tensors the kernels run under `TRITON_INTERPRET=1`, which Triton reads when it is imported, so the Inductor
checks run in a fresh Python with it set; `_compile_builds` starts its own Python without it.
"""
import os, subprocess, sys

import pytest

triton = pytest.importorskip('triton')
from efficient_attention_nb.kernels import _compile_builds, _gpu_builds


def test_every_kernel_compiles_for_h100():
    sizes = _compile_builds()                                    # all ten builds, sm_90 machine code
    assert sorted(sizes) == sorted(_gpu_builds()) and len(sizes) == 10, sizes
    assert all(s > 10_000 for s in sizes.values()), sizes


INDUCTOR = r'''
import torch, torch.nn.functional as F
from efficient_attention_nb import causal_linear_attention
from efficient_attention_nb.delta_rule import delta_rule_attention
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
q, k = (torch.randn(2, 3, 70, 8, generator=g) for _ in 'qk')
v, beta, lg = torch.randn(2, 3, 70, 6, generator=g), torch.rand(2, 3, 70, generator=g), -torch.rand(2, 3, 70, generator=g)
mask = torch.arange(70)[None] < torch.tensor([[70], [41]])
calls = {'linear attention': (lambda q, k, v: causal_linear_attention(q, k, v, mask=mask, chunk_size=32, backend='triton'),
                              (q, k, v)),
         'delta rule': (lambda q, k, v, b, lg: delta_rule_attention(q, F.normalize(k, dim=-1), v, b, g=lg, chunk_size=32,
                                                                   backend='triton', check_bounds=False),
                        (q, k, v, beta, lg))}
for name, (fn, xs) in calls.items():
    compiled = torch.compile(fn, fullgraph=True)                                   # Inductor
    outs = []
    for f in (fn, compiled):
        leaves = [x.clone().requires_grad_() for x in xs]
        out = f(*leaves)
        outs.append([out, *torch.autograd.grad(out.square().sum(), leaves)])
    for a, r in zip(outs[1], outs[0]):
        torch.testing.assert_close(a, r, rtol=0, atol=1e-5 * r.abs().max().item())   # Inductor may reorder sums
    print(name, 'ok')
'''


def test_inductor_through_the_triton_operators():
    r = subprocess.run([sys.executable, '-c', INDUCTOR], capture_output=True, text=True,
                       env={**os.environ, 'TRITON_INTERPRET': '1'}, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.split() == ['linear', 'attention', 'ok', 'delta', 'rule', 'ok'], r.stdout
