"""`nbs/_run_tutorials.py` (what `make main` runs): notebooks run several at a time, each in its own kernel, slow cells
left out, the executed copies written, and a failing cell fails the run."""
import importlib.util
import json, os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _runner():
    spec = importlib.util.spec_from_file_location('_run_tutorials', ROOT / 'nbs' / '_run_tutorials.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def _nb(path, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'python3', 'language': 'python'}
    nbformat.write(nb, path)
    return path


def test_notebooks_run_two_at_a_time(tmp_path, capsys, monkeypatch):
    run = _runner()
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    a = _nb(tmp_path / 'a.ipynb', 'import os; print("pid", os.getpid())', '#| slow\nraise SystemExit("slow cell ran")')
    b = _nb(tmp_path / 'b.ipynb', 'import os; print("pid", os.getpid())', 'print(6 * 7)',
            'print(os.environ["OMP_NUM_THREADS"])')
    out = tmp_path / 'out'
    run.main([str(a), str(b), '--out', str(out), '--jobs', '2', '--no-progress'])
    done = {p.name: nbformat.read(out / p.name, as_version=4) for p in (a, b)}
    assert len(done['a.ipynb'].cells) == 1 and done['b.ipynb'].cells[1].outputs[0].text == '42\n'
    pids = {nb.cells[0].outputs[0].text for nb in done.values()}
    assert len(pids) == 2                                                  # a kernel of its own for each notebook
    share = max(1, len(os.sched_getaffinity(0)) // 2)                      # each kernel gets its share of the cores
    assert done['b.ipynb'].cells[2].outputs[0].text == f'{share}\n'
    printed = capsys.readouterr().out
    assert 'a.ipynb' in printed and 'b.ipynb' in printed and 'executed 2 tutorials' in printed
    assert run.code_cells(run.load(a, run.SKIP)) == 1


def test_a_failing_notebook_fails_the_run(tmp_path):
    run = _runner()
    bad = _nb(tmp_path / 'bad.ipynb', 'raise ValueError("broken tutorial")')
    with pytest.raises(Exception, match='broken tutorial'):
        run.main([str(bad), '--out', str(tmp_path / 'out'), '--jobs', '2', '--no-progress'])


def test_the_longest_notebooks_start_first(tmp_path):
    "The order comes from the last run's times, then nbs/_tutorial_times.json, then the number of code cells."
    run = _runner()
    names = sorted(p.stem for p in (ROOT / 'nbs').glob('[0-9]*.ipynb')) + ['index']
    committed = json.loads(run.TIMES.read_text())
    assert sorted(committed) == sorted(names) and all(t > 0 for t in committed.values()), committed
    a, b, c = (_nb(tmp_path / f'{x}.ipynb', 'x = 1', 'y = 2') for x in 'abc')
    out = tmp_path / 'out'
    run.main([str(a), str(b), '--out', str(out), '--jobs', '1', '--no-progress'])
    took = json.loads((out / 'times.json').read_text())
    assert sorted(took) == ['a', 'b'] and all(t > 0 for t in took.values())
    (out / 'times.json').write_text('{"a": 1.0, "b": 9.0}')
    guess = run.expected_seconds([a, b, c], out, {a: 2, b: 2, c: 2})
    assert guess == {a: 1.0, b: 9.0, c: 0.6}
