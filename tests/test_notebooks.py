"""Run every notebook through nbdev's own test runner (`nbdev_test`), one pytest case per notebook.

Cells flagged `#| slow` or `#| cuda` are skipped (settings.ini `tst_flags`); set `EANB_TEST_FLAGS="slow"` to run them.
A failing cell fails its notebook's case, and the message shows nbdev's traceback naming the notebook and the cell.
"""
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBDEV_TEST = str(Path(sys.executable).parent / 'nbdev_test')
NOTEBOOKS = sorted(p for p in (ROOT / 'nbs').glob('*.ipynb') if not p.name.startswith('_'))


def run_nbdev_test(nb: Path, flags: str = '', cwd: Path = ROOT, timeout: int = 1500):
    "Run `nbdev_test --path nb` in a fresh process; return (returncode, combined output)."
    cmd = [NBDEV_TEST, '--path', str(nb), '--n_workers', '0']
    if flags: cmd += ['--flags', flags]
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, 'MPLBACKEND': 'Agg'})
    return r.returncode, r.stdout + r.stderr


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert 'index.ipynb' in names and '00_core.ipynb' in names, names


HEAVY = {'07_benchmarks', '10_robustness'}     # over 40 s each on 2 cores: `make quick` leaves them to `make test`


@pytest.mark.parametrize('nb', [pytest.param(p, marks=pytest.mark.slow) if p.stem in HEAVY else p for p in NOTEBOOKS],
                         ids=[p.stem for p in NOTEBOOKS])
def test_notebook(nb):
    rc, out = run_nbdev_test(nb, flags=os.environ.get('EANB_TEST_FLAGS', ''))
    assert rc == 0 and 'Success' in out, f'{nb.name} failed under nbdev_test:\n{out[-6000:]}'


def test_runner_fails_on_a_failing_cell(tmp_path):
    "The runner above must turn a failing cell into a failure (guards against a silently green suite)."
    nb = {'cells': [{'cell_type': 'code', 'id': 'ok', 'metadata': {}, 'execution_count': None, 'outputs': [],
                     'source': 'x = 1'},
                    {'cell_type': 'code', 'id': 'bad', 'metadata': {}, 'execution_count': None, 'outputs': [],
                     'source': 'assert x == 2, "deliberately failing cell"'}],
          'metadata': {'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}},
          'nbformat': 4, 'nbformat_minor': 5}
    (tmp_path / 'nbs').mkdir()
    (tmp_path / 'settings.ini').write_text((ROOT / 'settings.ini').read_text())   # nbdev finds its config upwards
    path = tmp_path / 'nbs' / 'failing_probe.ipynb'
    path.write_text(json.dumps(nb))
    rc, out = run_nbdev_test(path, cwd=tmp_path)
    assert rc != 0, out
    assert 'deliberately failing cell' in out and 'failing_probe' in out, out


def test_record_cuda_writes_only_the_cuda_cells(tmp_path):
    "nbs/_record_cuda.py (make gpu) runs what nbdev_test --flags cuda runs and records the cuda cells' outputs alone."
    import importlib.util
    spec = importlib.util.spec_from_file_location('_record_cuda', ROOT / 'nbs' / '_record_cuda.py')
    rec = importlib.util.module_from_spec(spec); spec.loader.exec_module(rec)
    cell = lambda i, src, outs=(): {'cell_type': 'code', 'id': i, 'metadata': {}, 'execution_count': None,
                                    'outputs': list(outs), 'source': src}
    kept = [{'output_type': 'stream', 'name': 'stdout', 'text': 'committed\n'}]
    nb = {'cells': [cell('a', 'x = 20\nprint("not recorded")', kept), cell('b', '#| cuda\nprint(x + 1)'),
                    cell('c', '#| slow\nraise RuntimeError("slow cells are skipped")', kept)],
          'metadata': {'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}},
          'nbformat': 4, 'nbformat_minor': 5}
    (tmp_path / 'nbs').mkdir()
    (tmp_path / 'settings.ini').write_text((ROOT / 'settings.ini').read_text())
    path = tmp_path / 'nbs' / 'probe.ipynb'
    path.write_text(json.dumps(nb))
    rec.record(path, rec.cuda_outputs(path))
    cells = {c['id']: c for c in json.loads(path.read_text())['cells']}
    assert [''.join(o.get('text', '')) for o in cells['b']['outputs']] == ['21\n'], cells['b']['outputs']
    assert cells['a']['outputs'] == kept and cells['c']['outputs'] == kept
    (tmp_path / 'nbs' / 'bad.ipynb').write_text(json.dumps({**nb, 'cells': [cell('d', '#| cuda\n1 / 0')]}))
    with pytest.raises(RuntimeError, match='ZeroDivisionError'): rec.cuda_outputs(tmp_path / 'nbs' / 'bad.ipynb')


def test_record_cuda_bare_runs_without_nbdev_and_applies_later(tmp_path):
    "--bare (a GPU machine without nbdev): the same cells run in one process, cuda stdout saved per cell; --apply."
    import importlib.util
    spec = importlib.util.spec_from_file_location('_record_cuda', ROOT / 'nbs' / '_record_cuda.py')
    rec = importlib.util.module_from_spec(spec); spec.loader.exec_module(rec)
    cell = lambda i, src: {'cell_type': 'code', 'id': i, 'metadata': {}, 'execution_count': None, 'outputs': [],
                           'source': src}
    nb = {'cells': [cell('a', '#| hide\nfrom nbdev.showdoc import *'), cell('b', 'x = 20\nprint("not recorded")'),
                    cell('c', '#| cuda\ntest_eq(x, 20); print(x + 1)'), cell('d', 'show_doc(print)'),
                    cell('e', '#| slow\nraise RuntimeError("slow cells are skipped")'),
                    cell('f', '#| cuda\n1 / 0'), cell('g', '#| cuda\nprint("skipped by id")')],
          'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}
    path = tmp_path / 'probe.ipynb'
    path.write_text(json.dumps(nb))
    saved = []
    outs, failed = rec.bare_outputs(path, skip={'g'}, save=lambda o: saved.append(dict(o)))
    assert outs == {'c': '21\n'} and failed == ['f'], (outs, failed)
    assert saved[-1] == outs and len(saved) == 4                      # after each cell that ran: a, b, c, f
    (tmp_path / 'out.json').write_text(json.dumps({'probe.ipynb': outs}))
    rec.apply(tmp_path / 'out.json', nbs=tmp_path)
    cells = {c['id']: c for c in json.loads(path.read_text())['cells']}
    assert [''.join(o['text']) for o in cells['c']['outputs']] == ['21\n'] and cells['f']['outputs'] == []
