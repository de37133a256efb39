"""The original projects' signatures are kept: every class taken from one has the original's parameters in the
original's positional order, with the original's defaults; parameters of our own come after theirs.

`ORIGINALS` is written from the originals' source:
  linear-attention-transformer 0.19.1 and linformer 0.2.3 (PyPI sdists), compositional-attention-pytorch 0.0.1
  (PyPI sdist), John Giorgi's compact-multi-head-self-attention-pytorch (`modules/lama.py`, `modules/lama_pooler.py`)
  and Kui Xu's Linear-Multihead-Attention (`linear_multihead_attention.py`; its README and docstring give
  `dropout=0.0, seq_len=100`, its code `dropout=0.1, seq_len=512`: we follow the documentation).
An original's option that is not implemented here is listed in `UNSUPPORTED`: it must be absent, and every parameter
from where it stands on must be keyword-only, so a positional call that reaches it fails instead of meaning
something else. linear-attention-transformer's `AutoregressiveWrapper` is not taken: `generate` is core's.

The slow test installs the PyPI originals (no dependencies) and checks the table against their source.
"""
import ast, inspect, subprocess, sys
from pathlib import Path

import pytest
import torch

import efficient_attention_nb as ean

REQ = inspect.Parameter.empty        # a parameter without a default

_LAT_BODY = [('dim', REQ), ('depth', REQ), ('max_seq_len', REQ), ('heads', 8), ('dim_head', None), ('bucket_size', 64),
             ('causal', False), ('ff_chunks', 1), ('ff_glu', False), ('ff_dropout', 0.), ('attn_layer_dropout', 0.),
             ('attn_dropout', 0.), ('reversible', False), ('blindspot_size', 1), ('n_local_attn_heads', 0),
             ('local_attn_window_size', 128), ('receives_context', False), ('attend_axially', False),
             ('pkm_layers', ()), ('pkm_num_keys', 128), ('linformer_settings', None),
             ('context_linformer_settings', None), ('shift_tokens', False)]
_LAT_LM = [('num_tokens', REQ), ('dim', REQ), ('depth', REQ), ('max_seq_len', REQ), ('heads', 8), ('dim_head', 64),
           ('causal', False), ('emb_dim', None), ('reversible', False), ('ff_chunks', 1), ('ff_glu', False),
           ('ff_dropout', 0.), ('attn_layer_dropout', 0.), ('attn_dropout', 0.), ('blindspot_size', 1),
           ('n_local_attn_heads', 0), ('local_attn_window_size', 128), ('return_embeddings', False),
           ('receives_context', False), ('pkm_layers', ()), ('pkm_num_keys', 128), ('attend_axially', False),
           ('linformer_settings', None), ('context_linformer_settings', None), ('use_axial_pos_emb', True),
           ('use_rotary_emb', False), ('shift_tokens', False)]
_LF = [('k', 256), ('heads', 8), ('dim_head', None), ('one_kv_head', False), ('share_kv', False)]

# (our name, the original project, its constructor's parameters, its forward's named parameters or None)
ORIGINALS = [
    ('LinearAttentionTransformerLM', 'linear-attention-transformer 0.19.1', _LAT_LM, [('x', REQ)]),
    ('LinearAttentionTransformer', 'linear-attention-transformer 0.19.1', _LAT_BODY, [('x', REQ)]),
    ('LinformerSettings', 'linear-attention-transformer 0.19.1', [('k', REQ)], None),
    ('LinformerContextSettings', 'linear-attention-transformer 0.19.1', [('seq_len', REQ), ('k', REQ)], None),
    ('ImageLinearAttention', 'linear-attention-transformer 0.19.1',
     [('chan', REQ), ('chan_out', None), ('kernel_size', 1), ('padding', 0), ('stride', 1), ('key_dim', 64),
      ('value_dim', 64), ('heads', 8), ('norm_queries', True)], [('x', REQ), ('context', None)]),
    ('LinformerSelfAttention', 'linformer 0.2.3', [('dim', REQ), ('seq_len', REQ)] + _LF + [('dropout', 0.)],
     [('x', REQ), ('context', None)]),
    ('Linformer', 'linformer 0.2.3', [('dim', REQ), ('seq_len', REQ), ('depth', REQ)] + _LF
     + [('reversible', False), ('dropout', 0.)], [('x', REQ)]),
    ('LinformerLM', 'linformer 0.2.3', [('num_tokens', REQ), ('dim', REQ), ('seq_len', REQ), ('depth', REQ)] + _LF
     + [('reversible', False), ('dropout', 0.)], [('x', REQ)]),
    ('CompositionalAttention', 'compositional-attention-pytorch 0.0.1',
     [('dim', REQ), ('dim_head', 64), ('num_searches', 8), ('num_retrievals', 2), ('dropout', 0.),
      ('prenorm', False), ('causal', False)], [('x', REQ), ('mask', None)]),
    ('LAMA', 'compact-multi-head-self-attention-pytorch',
     [('num_heads', REQ), ('input_dim', REQ), ('activation', torch.tanh), ('normalize', True), ('bias', False)],
     [('inputs', REQ), ('mask', None)]),
    ('LAMAPooler', 'compact-multi-head-self-attention-pytorch',
     [('num_heads', REQ), ('input_dim', REQ), ('activation', torch.tanh), ('normalize', True), ('bias', False)],
     [('inputs', REQ), ('mask', None)]),
    ('LinearMultiheadAttention', 'Linear-Multihead-Attention',
     [('embed_dim', REQ), ('num_heads', REQ), ('dropout', 0.), ('bias', True), ('add_bias_kv', False),
      ('add_zero_attn', False), ('kdim', None), ('vdim', None), ('seq_len', 100), ('proj_k', 128),
      ('param_sharing', 'none')],
     [('query', REQ), ('key', REQ), ('value', REQ), ('key_padding_mask', None), ('need_weights', True),
      ('attn_mask', None)]),
]
UNSUPPORTED = {'LinearAttentionTransformerLM': {'pkm_layers', 'pkm_num_keys', 'use_axial_pos_emb', 'use_rotary_emb'},
               'LinearAttentionTransformer': {'pkm_layers', 'pkm_num_keys'}}


def _same_default(a, b) -> bool:
    if a is REQ or b is REQ or callable(a): return a is b
    return type(a) is type(b) and a == b


def signature_mismatches(ours, original:list, unsupported:set=frozenset()) -> list[str]:
    "What breaks the rules in the module docstring, one message each; [] when `ours` keeps the original's signature."
    ps = [p for p in inspect.signature(ours).parameters.values() if p.name != 'self']
    named = {p.name: p for p in ps}
    positional = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    cut = next((i for i, (n, _) in enumerate(original) if n in unsupported), len(original))
    out = []
    if [p.name for p in positional[:cut]] != [n for n, _ in original[:cut]]:
        out.append(f'positional order {[p.name for p in positional[:cut]]} != {[n for n, _ in original[:cut]]}')
    if cut < len(original) and len(positional) > cut:
        out.append(f'{[p.name for p in positional[cut:]]} must be keyword-only: the original has '
                   f'{original[cut][0]!r} at position {cut}')
    kept = [(n, d) for n, d in original if n not in unsupported]
    for n, d in kept:
        if n not in named: out.append(f'{n!r} is missing')
        elif not _same_default(named[n].default, d): out.append(f'{n!r} defaults to {named[n].default!r}, not {d!r}')
    out += [f'{n!r} is not implemented here and must be absent' for n in unsupported if n in named]
    order = [p.name for p in ps if p.name in dict(kept)]
    if order != [n for n, _ in kept]: out.append(f"the original's parameters are in the order {order}")
    last = max((i for i, p in enumerate(ps) if p.name in dict(kept)), default=-1)
    out += [f'our own {p.name!r} comes before the original\'s' for p in ps[:last] if p.name not in dict(original)]
    return out


@pytest.mark.parametrize('name, project, init, fwd', ORIGINALS, ids=[o[0] for o in ORIGINALS])
def test_signature_matches_the_original(name, project, init, fwd):
    cls = getattr(ean, name)
    assert signature_mismatches(cls, init, UNSUPPORTED.get(name, set())) == [], project
    if fwd is not None: assert signature_mismatches(cls.forward, fwd) == [], f'{project}: forward'


def test_the_rules_can_fail():
    "The checker finds each kind of mismatch (the old LM signature among them)."
    def old_lm(num_tokens, dim, heads, depth, max_seq_len, causal=False, dim_head=None): pass
    msgs = signature_mismatches(old_lm, _LAT_LM[:7])
    assert any('positional order' in m for m in msgs) and any("'heads' defaults to" in m for m in msgs)
    def late(dim, depth, max_seq_len, heads=8, dim_head=None, bucket_size=64, causal=False, ff_chunks=1, ff_glu=False,
             ff_dropout=0., attn_layer_dropout=0., attn_dropout=0., reversible=False, blindspot_size=1,
             n_local_attn_heads=0, local_attn_window_size=128, receives_context=False, attend_axially=False,
             linformer_settings=None, context_linformer_settings=None, shift_tokens=False): pass
    msgs = signature_mismatches(late, _LAT_BODY, UNSUPPORTED['LinearAttentionTransformer'])
    assert any('must be keyword-only' in m for m in msgs)
    def ours_first(dim, mine=1, dim_head=64): pass
    assert any("our own 'mine'" in m for m in signature_mismatches(ours_first, [('dim', REQ), ('dim_head', 64)]))
    def lama(num_heads, input_dim, activation=torch.sigmoid, normalize=True, bias=False): pass
    assert signature_mismatches(lama, ORIGINALS[9][2]) == ["'activation' defaults to " + repr(torch.sigmoid)
                                                          + ', not ' + repr(torch.tanh)]


# the slow test: the table against the originals' own source, installed from PyPI without their dependencies
PYPI = {'linear-attention-transformer==0.19.1': 'linear_attention_transformer/linear_attention_transformer.py',
        'linformer==0.2.3': 'linformer/linformer.py',
        'compositional-attention-pytorch==0.0.1': 'compositional_attention_pytorch/compositional_attention_pytorch.py'}
IMAGES = 'linear_attention_transformer/images.py'


def _default(node):
    if node is None: return REQ
    try: return ast.literal_eval(node)
    except ValueError: return {'tuple()': (), 'torch.tanh': torch.tanh}[ast.unparse(node)]


def _params(fn:ast.FunctionDef) -> list:
    args = fn.args.args[1:] if fn.args.args and fn.args.args[0].arg == 'self' else fn.args.args
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    return [(a.arg, _default(d)) for a, d in zip(args, defaults)]


def _signatures(path:Path) -> dict:
    "{class name: (constructor parameters, forward parameters)} and namedtuple fields, read with ast (no import)."
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            fns = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
            out[node.name] = (_params(fns['__init__']) if '__init__' in fns else None,
                              _params(fns['forward']) if 'forward' in fns else None)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func) == 'namedtuple':
            out[node.targets[0].id] = ([(f, REQ) for f in ast.literal_eval(node.value.args[1])], None)
    return out


FROM_PYPI = [o for o in ORIGINALS if o[1].split()[0] in {p.split('==')[0] for p in PYPI}]


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp('originals')
    r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-deps', '--no-compile', '-q',
                        '--disable-pip-version-check', '--target', str(target), *PYPI], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f'could not install the original packages from PyPI ({", ".join(PYPI)}): {r.stderr.strip()[-300:]}')
    sigs = {}
    for rel in [*PYPI.values(), IMAGES]: sigs.update(_signatures(target / rel))
    return sigs


@pytest.mark.slow
@pytest.mark.parametrize('name, project, init, fwd', FROM_PYPI, ids=[o[0] for o in FROM_PYPI])
def test_table_and_ours_against_installed_originals(installed, name, project, init, fwd):
    orig_init, orig_fwd = installed[name]
    assert orig_init == init, f'the table disagrees with {project}'
    if fwd is not None: assert [p for p in orig_fwd if p[0] not in ('kwargs',)] == fwd
    cls = getattr(ean, name)
    assert signature_mismatches(cls, orig_init, UNSUPPORTED.get(name, set())) == []
    if orig_fwd is not None: assert signature_mismatches(cls.forward, orig_fwd) == []
