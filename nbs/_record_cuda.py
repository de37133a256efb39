"""On a machine with a GPU: run notebooks as `nbdev_test --flags cuda` does and record the outputs of their
`#| cuda` cells in the notebooks themselves (used by `make gpu`). Every other cell runs (slow and notest cells
excepted, as in the tests) but keeps its committed outputs; a failing cell stops that notebook with nbdev's traceback
and records nothing for it. Run `nbdev_clean` afterwards.

    python nbs/_record_cuda.py [NOTEBOOK ...]        (default: every notebook in nbs/)

A GPU machine that has torch but not nbdev, IPython or pip access (a lent device): run the cells there in one plain
Python process, which writes the cuda cells' stdout to a JSON file after every cell (so a run cut off by a time limit
keeps what it finished), then write that file into the notebooks on the machine the notebooks live on:

    python nbs/_record_cuda.py --bare OUT.json [--skip CELL_ID ...] NOTEBOOK ...     (on the GPU machine)
    python nbs/_record_cuda.py --apply OUT.json                                       (here; then nbdev_clean)
"""
import argparse, contextlib, io, json, linecache, os, sys, time, traceback
from pathlib import Path

NBS = Path(__file__).resolve().parent
SKIP = {'slow', 'notest'}


def directives(cell) -> set: return set(getattr(cell, 'directives_', None) or {})


def cuda_outputs(path: Path) -> dict:
    "Execute the notebook's cells (cuda included); return {cell id: outputs} of its cuda cells; raise on a failure."
    os.environ['IN_TEST'] = '1'
    from execnb.shell import CaptureShell
    from fastcore.xtras import working_directory
    from nbdev.frontmatter import FrontmatterProc
    from nbdev.process import NBProcessor
    nb = NBProcessor(path, procs=FrontmatterProc, process=True).nb
    shell = CaptureShell(path)
    try:
        with working_directory(path.parent):
            shell.run_all(nb, exc_stop=True, preproc=lambda c: c.cell_type != 'code' or bool(directives(c) & SKIP))
    except Exception:
        raise RuntimeError(shell.prettytb(fname=path)) from None
    return {c.id: c.get('outputs', []) for c in nb.cells if c.cell_type == 'code' and 'cuda' in directives(c)}


def record(path: Path, outputs: dict):
    "Write the outputs into the notebook's JSON, cell by cell id; other cells are left as they are."
    nb = json.loads(path.read_text())
    for cell in nb['cells']:
        if cell.get('id') in outputs: cell['outputs'] = outputs[cell['id']]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')


def _bare_source(src: str) -> tuple[str|None, bool]:
    """What the bare runner executes of a cell (None: skipped; the test helpers for nbdev's showdoc import), and
    whether it is a cuda cell."""
    flags = {w for l in src.splitlines() if l.startswith('#|') for w in l[2:].split()}
    if flags & (SKIP | {'default_exp'}) or src.lstrip().startswith('show_doc('): return None, False
    return ('from fastcore.test import *' if 'nbdev.showdoc' in src else src), 'cuda' in flags


def bare_outputs(path: Path, skip=(), save=None) -> tuple[dict, list]:
    """Run the notebook's code cells in order in this process's `__main__` (no nbdev or IPython); return the stdout
    of its cuda cells as {cell id: text} and the ids of the cells that failed (their tracebacks are printed)."""
    import __main__
    nb, outs, failed, cwd = json.loads(path.read_text()), {}, [], os.getcwd()
    os.chdir(path.parent)
    try:
        for c in nb['cells']:
            if c['cell_type'] != 'code' or c['id'] in skip: continue
            src, cuda = _bare_source(''.join(c['source']))
            if src is None: continue
            buf, t0, name = io.StringIO(), time.time(), f"<cell {c['id']}>"
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)       # tracebacks show the lines
            try:
                with contextlib.redirect_stdout(buf): exec(compile(src, name, 'exec'), __main__.__dict__)
                ok = True
            except Exception:
                ok = False; failed.append(c['id']); print(buf.getvalue() + traceback.format_exc(), file=sys.stderr)
            print(f"{path.name} {c['id']}: {'ok' if ok else 'FAILED'} {time.time() - t0:.1f} s", flush=True)
            if cuda and ok: outs[c['id']] = buf.getvalue()
            if save: save(outs)
    finally: os.chdir(cwd)
    return outs, failed


def apply(json_path: Path, nbs: Path = NBS):
    "Write a --bare run's outputs (JSON: notebook name → {cell id: stdout}) into the notebooks in `nbs`."
    for name, outs in json.loads(Path(json_path).read_text()).items():
        record(nbs / name, {i: [{'name': 'stdout', 'output_type': 'stream', 'text': t}] if t else []
                            for i, t in outs.items()})
        print(f'{name}: {len(outs)} cuda cell(s) recorded')


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument('notebooks', nargs='*', help='notebooks to run (default: every notebook in nbs/)')
    p.add_argument('--bare', metavar='OUT.json', help='run in one plain Python process; write the outputs here')
    p.add_argument('--skip', nargs='+', default=(), metavar='CELL_ID', help='with --bare: cells not to run')
    p.add_argument('--apply', metavar='OUT.json', help="write a --bare run's outputs into the notebooks")
    a = p.parse_args(argv)
    if a.apply: return apply(Path(a.apply))
    import torch
    if not torch.cuda.is_available(): sys.exit('_record_cuda.py records GPU outputs: torch sees no CUDA device here')
    paths = ([Path(x).resolve() for x in a.notebooks]
             or sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_')))
    failed, done = [], {}
    for path in paths:
        t0 = time.time()
        if a.bare:
            def save(outs): done[path.name] = outs; Path(a.bare).write_text(json.dumps(done, indent=1))
            outs, bad = bare_outputs(path, set(a.skip), save)
            if bad: failed.append(f"{path.name} ({', '.join(bad)})")
        else:
            try: outs = cuda_outputs(path)
            except RuntimeError as e: print(e, file=sys.stderr); failed.append(path.name); continue
            if outs: record(path, outs)
        print(f'{path.name}: {len(outs)} cuda cell(s) {"run" if a.bare else "recorded"} in {time.time() - t0:.0f} s',
              flush=True)
    if failed: sys.exit(f'failed: {", ".join(failed)}')


if __name__ == '__main__': main(sys.argv[1:])
