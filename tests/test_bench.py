"""The benchmark command on tiny sizes: it runs every available mechanism, writes its files, one row per mechanism×n.

No timing assertions: timings on a shared machine are measured and reported, never asserted.
"""
import csv, math

import pytest

from efficient_attention_nb.bench import BENCH_CASES, bench_cli, select_cases

NS = (32, 48)


def _rows(out):
    with open(out / 'bench.csv', newline='') as f: return list(csv.DictReader(f))


def test_quick_bench_every_mechanism(tmp_path, capsys):
    rc = bench_cli(['--n', *map(str, NS), '--backward', '--memory', 'none', '--repeats', '1', '--warmup', '0',
                    '--threads', '1', '--out', str(tmp_path), '--no-progress'])
    assert rc == 0
    for name in ('bench.csv', 'bench.md', 'bench.png', 'gflops.png'):
        assert (tmp_path / name).stat().st_size > 0, name
    rows = _rows(tmp_path)
    names = [c.name for c in select_cases(log=None)]
    assert {'sdpa', 'sdpa_causal', 'causal_chunked', 'causal_step', 'linformer', 'lama'} <= set(names)
    assert sorted((r['mechanism'], int(r['n'])) for r in rows) == sorted((m, n) for m in names for n in NS)
    assert all(r['status'] == 'ok' for r in rows), [(r['mechanism'], r['status']) for r in rows if r['status'] != 'ok']
    for r in rows:
        assert float(r['fwd_ms']) > 0
        if BENCH_CASES[r['mechanism']].backward: assert float(r['fwdbwd_ms']) > 0
        if r['baseline']: assert float(r['speedup_fwd']) > 0
    md = (tmp_path / 'bench.md').read_text()
    assert md.count('\n| ') >= len(rows) and 'float32 matmul rate' in md
    out = capsys.readouterr().out
    assert 'wrote' in out and 'bench.csv' in out


def test_bench_memory_in_fresh_process(tmp_path):
    rc = bench_cli(['--n', '256', '--mechanisms', 'causal_chunked', '--backward', '--repeats', '1', '--threads', '1',
                    '--out', str(tmp_path), '--no-progress'])
    assert rc == 0
    rows = {r['mechanism']: r for r in _rows(tmp_path)}
    assert set(rows) == {'sdpa_causal', 'causal_chunked'}
    for r in rows.values():
        assert math.isfinite(float(r['mem_fwdbwd_mb'])) and float(r['mem_fwdbwd_mb']) >= 0


def test_missing_peers_are_one_line_notices():
    msgs = []
    cases = select_cases(log=msgs.append)
    peers = [c.name for c in BENCH_CASES.values() if c.peer]
    for name in peers:
        assert (name in [c.name for c in cases]) != any(m.startswith(f'peer {name}:') for m in msgs)
    assert all('\n' not in m for m in msgs)


@pytest.mark.parametrize('argv', [['--n', '0'], ['--mechanisms', 'flash'], ['--repeats', '0'], ['--dim', '500']])
def test_bad_arguments_exit_2(argv, tmp_path):
    with pytest.raises(SystemExit) as e: bench_cli(argv + ['--out', str(tmp_path)])
    assert e.value.code == 2
