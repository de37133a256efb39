"""Run every tutorial notebook top to bottom and save the executed copies (used by `make tutorials` / `make main`).

Cells flagged `#| slow` or `#| cuda` (settings.ini `tst_flags`) are left out unless named with `--flags`, exactly as
`nbdev_test` does; their saved outputs are already in the committed notebooks. Notebooks run `--jobs` at a time
(default 2), each in a kernel of its own with its share of the cores (`OMP_NUM_THREADS` = cores // jobs unless set:
two kernels of two threads each on two cores spend most of their time waiting for each other's threads); a progress
bar counts the cells run and estimates the time left. The notebooks expected to take longest start first, so that
the short ones fill the gaps at the end: the seconds each took are written to `OUT/times.json`, and until a run has
written them the order comes from `nbs/_tutorial_times.json` (measured on two cores; only the order depends on it).

    python nbs/_run_tutorials.py [--out _executed] [--flags "slow"] [--jobs 2] [NOTEBOOK ...]
"""
import argparse, json, os, re, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from tqdm.auto import tqdm

NBS = Path(__file__).resolve().parent
SKIP = {'notest', 'slow', 'cuda'}
TIMES = NBS / '_tutorial_times.json'


def flags_of(src: str) -> set:
    "The nbdev directives of a cell (`#| slow` → {'slow'})."
    return {m.group(1) for m in re.finditer(r'^#\|\s*(\w+)\s*$', src, re.M)}


def load(nb_path: Path, skip: set):
    "The notebook without the cells flagged with one of `skip`."
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells = [c for c in nb.cells if c.cell_type != 'code' or not (flags_of(c.source) & skip)]
    return nb


def code_cells(nb) -> int: return sum(c.cell_type == 'code' for c in nb.cells)


def expected_seconds(nbs: list, out: Path, cells: dict) -> dict:
    "Each notebook's expected seconds: from the last run into `out`, else nbs/_tutorial_times.json, else 0.3 s a cell."
    known = {}
    for f in (TIMES, out / 'times.json'):
        if f.exists(): known.update(json.loads(f.read_text()))
    return {p: known.get(p.stem, 0.3 * cells[p]) for p in nbs}


def run(nb_path: Path, out: Path, skip: set, timeout: int = 1800, on_cell=None, threads: str | None = None) -> float:
    """Execute one notebook in a private kernel (with `OMP_NUM_THREADS=threads` if given), write the executed copy into
    `out`; the seconds it took."""
    nb = load(nb_path, skip)
    hook = (lambda **_: on_cell()) if on_cell else None
    env = {**os.environ, **({'OMP_NUM_THREADS': threads} if threads else {})}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as sockets:          # local sockets, not TCP ports: a private kernel per notebook
        km = KernelManager(kernel_name='python3', transport='ipc', ip=f'{sockets}/kernel')
        try: NotebookClient(nb, km=km, timeout=timeout, resources={'metadata': {'path': str(NBS)}},
                            on_cell_executed=hook).execute(env=env)
        finally:
            if km.has_kernel: km.shutdown_kernel()             # the client leaves a kernel it was given running
    nbformat.write(nb, out / nb_path.name)
    return time.time() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('notebooks', nargs='*', help='default: every notebook in nbs/')
    ap.add_argument('--out', default='_executed'); ap.add_argument('--flags', default='', help='flags to run, e.g. "slow"')
    ap.add_argument('--jobs', type=int, default=2, help='notebooks run at once, each in its own kernel (default 2)')
    ap.add_argument('--no-progress', action='store_true', help='no progress bar, only a line per notebook')
    a = ap.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    nbs = [Path(p) for p in a.notebooks] or sorted(p for p in NBS.glob('[0-9]*.ipynb')) + [NBS / 'index.ipynb']
    skip = SKIP - set(a.flags.split())
    threads = os.environ.get('OMP_NUM_THREADS') or str(max(1, len(os.sched_getaffinity(0)) // max(1, a.jobs)))
    sizes = {p: code_cells(load(p, skip)) for p in nbs}
    guess = expected_seconds(nbs, out, sizes)
    order = sorted(nbs, key=lambda p: -guess[p]) if a.jobs > 1 else nbs     # the longest first: the last ones fill gaps
    bar = tqdm(total=sum(sizes.values()), desc='tutorials', unit='cell', mininterval=1, disable=a.no_progress or None)
    t0, took = time.time(), {}
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        jobs = {pool.submit(run, p, out, skip, on_cell=lambda: bar.update(), threads=threads): p for p in order}
        try:
            for job in as_completed(jobs):
                took[jobs[job].stem] = round(job.result(), 1)
                tqdm.write(f'   {jobs[job].name:28s}{took[jobs[job].stem]:7.1f} s')
        except BaseException:
            for job in jobs: job.cancel()                      # notebooks not started yet are not started
            raise
    bar.close()
    times = out / 'times.json'
    times.write_text(json.dumps({**(json.loads(times.read_text()) if times.exists() else {}), **took}, indent=1))
    print(f'== executed {len(nbs)} tutorials in {time.time() - t0:.0f} s ({a.jobs} at a time, {threads} threads each): '
          f'{out.resolve()}/')


if __name__ == '__main__': sys.exit(main())
