"""Run every tutorial notebook top to bottom and save the executed copies (used by `make tutorials` / `make main`).

Cells flagged `#| slow` or `#| cuda` (settings.ini `tst_flags`) are left out unless named with `--flags`, exactly as
`nbdev_test` does; their saved outputs are already in the committed notebooks.

    python nbs/_run_tutorials.py [--out _executed] [--flags "slow"] [NOTEBOOK ...]
"""
import argparse, re, sys, tempfile, time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NBS = Path(__file__).resolve().parent
SKIP = {'notest', 'slow', 'cuda'}


def flags_of(src: str) -> set:
    "The nbdev directives of a cell (`#| slow` → {'slow'})."
    return {m.group(1) for m in re.finditer(r'^#\|\s*(\w+)\s*$', src, re.M)}


def run(nb_path: Path, out: Path, skip: set, timeout: int = 1800) -> float:
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells = [c for c in nb.cells if c.cell_type != 'code' or not (flags_of(c.source) & skip)]
    t0 = time.time()
    with tempfile.TemporaryDirectory() as sockets:          # local sockets, not TCP ports: a private kernel per notebook
        km = KernelManager(kernel_name='python3', transport='ipc', ip=f'{sockets}/kernel')
        try: NotebookClient(nb, km=km, timeout=timeout, resources={'metadata': {'path': str(NBS)}}).execute()
        finally:
            if km.has_kernel: km.shutdown_kernel()             # the client leaves a kernel it was given running
    nbformat.write(nb, out / nb_path.name)
    return time.time() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('notebooks', nargs='*', help='default: every notebook in nbs/ (index last)')
    ap.add_argument('--out', default='_executed'); ap.add_argument('--flags', default='', help='flags to run, e.g. "slow"')
    a = ap.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    nbs = [Path(p) for p in a.notebooks] or sorted(p for p in NBS.glob('[0-9]*.ipynb')) + [NBS / 'index.ipynb']
    skip = SKIP - set(a.flags.split())
    for p in nbs:
        print(f'   {p.name:28s}', end='', flush=True)
        print(f'{run(p, out, skip):7.1f} s', flush=True)
    print(f'== executed tutorials: {out.resolve()}/')


if __name__ == '__main__': sys.exit(main())
