"""The benchmark harness on tiny sizes: every available mechanism runs and is written to files, one row per
mechanism × n; the timing helper interleaves; bad arguments are refused by name.

No timing assertions: timings on a shared machine are measured and reported, never asserted.
"""
import csv, math

import pytest

from efficient_attention_nb.bench import (BENCH_CASES, CAUSAL_FORMS, benchmark_causal, benchmark_lm_step,
                                          interleaved_times, lm_crossovers, ratio_spread, read_bench_results,
                                          run_bench, select_cases)

NS = (32, 48)


def _rows(path):
    with open(path, newline='') as f: return list(csv.DictReader(f))


def test_quick_bench_every_mechanism(tmp_path):
    log = []
    paths = run_bench(list(NS), backward=True, memory='none', repeats=1, warmup=0, threads=1, out=tmp_path,
                      log=log.append)
    for name in ('csv', 'md', 'png', 'gflops'):
        assert paths[name].stat().st_size > 0, name
    rows = _rows(paths['csv'])
    names = [c.name for c in select_cases(log=None)]
    assert {'sdpa', 'sdpa_causal', 'causal_chunked', 'causal_step', 'linformer', 'lama'} <= set(names)
    assert sorted((r['mechanism'], int(r['n'])) for r in rows) == sorted((m, n) for m in names for n in NS)
    bad = [(r['mechanism'], r['status']) for r in rows if r['status'] != 'ok']
    assert all(BENCH_CASES[m].peer for m, _ in bad), bad                   # a peer's own limits are reported
    for r in rows:
        if r['status'] != 'ok': continue
        assert float(r['fwd_ms']) > 0
        if BENCH_CASES[r['mechanism']].backward: assert float(r['fwdbwd_ms']) > 0
        if r['baseline']: assert float(r['speedup_fwd']) > 0
    back = read_bench_results(paths['csv'])                                 # the table, read back as numbers
    assert [(r['mechanism'], r['n'], r['status']) for r in back] == [(r['mechanism'], int(r['n']), r['status']) for r in rows]
    assert all(isinstance(r['fwd_ms'], float) for r in back)
    md = paths['md'].read_text()
    assert md.count('\n| ') >= len(rows) and 'float32 matmul rate' in md
    assert log[-1].startswith('wrote ') and 'bench.csv' in log[-1]


def test_batch_and_heads_reach_the_config(tmp_path):
    paths = run_bench([40], mechanisms=['causal_chunked'], batch=3, heads=4, memory='none', repeats=1, threads=1,
                      out=tmp_path, log=None)
    assert 'b=3, dim=512, heads=4' in paths['md'].read_text()
    assert {r['mechanism'] for r in _rows(paths['csv'])} == {'sdpa_causal', 'causal_chunked'}


def test_bench_memory_forks_agree_with_fresh_processes(tmp_path):
    mem = {}
    for fresh in (False, True):
        paths = run_bench([256], mechanisms=['causal_chunked'], backward=True, repeats=1, threads=1,
                          out=tmp_path / str(fresh), log=None, fresh_process=fresh)
        rows = {r['mechanism']: r for r in _rows(paths['csv'])}
        assert set(rows) == {'sdpa_causal', 'causal_chunked'}
        mem[fresh] = {m: float(r['mem_fwdbwd_mb']) for m, r in rows.items()}
        assert all(math.isfinite(x) and x > 0 for x in mem[fresh].values()), mem
    for m in mem[True]:                                                    # the two ways read the same, to 0.5 MiB
        assert abs(mem[True][m] - mem[False][m]) <= max(0.5, 0.02 * mem[True][m]), mem


_FORKS = r"""
import json, os, time
from efficient_attention_nb.bench import _in_fork
def boom(job): raise ValueError('boom ' + job['x'])
print(json.dumps([_in_fork(lambda job: {'twice': 2 * job['x']}, {'x': 21}, 30),
                  _in_fork(boom, {'x': 'here'}, 30),
                  _in_fork(lambda job: os._exit(3), {}, 30),
                  _in_fork(lambda job: time.sleep(60), {}, 0.5)]))
"""


def test_fork_answers_errors_crashes_and_timeouts():
    import json, subprocess, sys
    r = subprocess.run([sys.executable, '-c', _FORKS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ok, err, crash, slow = json.loads(r.stdout)
    assert ok == {'twice': 42}
    assert 'ValueError: boom here' in err['error']
    assert crash == {'error': 'the fork ended without an answer (wait status 768)'}   # exit status 3
    assert slow == {'error': 'the fork ended without an answer (killed after 0.5 s)'}


def test_memory_server_survives_a_failed_reading():
    from efficient_attention_nb.bench import BenchCase, BenchConfig, PeakMemoryServer
    cfg = BenchConfig(dim=64, heads=2)
    with PeakMemoryServer() as server:
        with pytest.raises(RuntimeError, match="KeyError: 'nowhere'"):
            server(BenchCase('nowhere', 'unregistered', BENCH_CASES['linear'].build), 64, cfg)
        with pytest.raises(ValueError, match='mode'): server(BENCH_CASES['linear'], 64, cfg, mode='bwd')
        assert server(BENCH_CASES['causal_cumsum'], 512, cfg, threads=1) > 0
        assert server.proc.poll() is None
    assert server.proc is None


def test_missing_peers_are_one_line_notices():
    msgs = []
    cases = select_cases(log=msgs.append)
    peers = [c.name for c in BENCH_CASES.values() if c.peer]
    for name in peers:
        assert (name in [c.name for c in cases]) != any(m.startswith(f'peer {name}:') for m in msgs)
    assert all('\n' not in m for m in msgs)


@pytest.mark.parametrize('kwargs, name', [(dict(ns=[0]), 'ns'), (dict(mechanisms=['flash']), 'mechanisms'),
                                          (dict(repeats=0), 'repeats'), (dict(dim=500), 'dim'),
                                          (dict(batch=0), 'batch'), (dict(memory='peak'), 'memory')])
def test_bad_arguments_name_themselves(kwargs, name, tmp_path):
    with pytest.raises((ValueError, TypeError), match=name): run_bench(**kwargs, out=tmp_path, log=None)


def test_interleaved_rounds_and_ratios():
    calls = []
    ts = interleaved_times({'a': lambda: calls.append('a'), 'b': lambda: calls.append('b')}, repeats=2, warmup=1)
    assert calls == ['a', 'b'] * 3 and [len(t) for t in ts.values()] == [2, 2]
    assert ratio_spread([4., 6., 5.], [1., 2., 1.]) == (5., 3., 5.)


def test_causal_forms_agree_and_time():
    import torch
    q, k, v = (torch.randn(2, 2, 29, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    ref = CAUSAL_FORMS['quadratic'](q, k, v)
    for name in ('cumsum', 'chunked', 'chunked_plain', 'recurrent'):
        torch.testing.assert_close(CAUSAL_FORMS[name](q, k, v), ref, atol=1e-4, rtol=1e-4)
    rows = benchmark_causal([33], forms=('chunked', 'sdpa'), b=2, h=2, d=8, e=8, backward=True, rearranged=True,
                            repeats=2, threads=1)
    assert [(r['form'], len(r['times_s'])) for r in rows] == [('chunked', 2), ('sdpa', 2)]


def test_lm_step_rows():
    rows = benchmark_lm_step([(2, 16)], num_tokens=17, dim=16, depth=1, heads=2, local_heads=1, window=4,
                             repeats=1, threads=1)
    r = rows[0]
    assert (r['b'], r['n']) == (2, 16) and r['linear_tok_s'] > 0 and r['softmax_tok_s'] > 0
    assert r['speedup_lo'] <= r['speedup'] <= r['speedup_hi']
    assert list(lm_crossovers(rows)) == [2]                                  # one crossover per batch size
