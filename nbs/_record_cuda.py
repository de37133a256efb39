"""On a machine with a GPU: run notebooks as `nbdev_test --flags cuda` does and record the outputs of their
`#| cuda` cells in the notebooks themselves (used by `make gpu`). Every other cell runs (slow and notest cells
excepted, as in the tests) but keeps its committed outputs; a failing cell stops that notebook with nbdev's traceback
and records nothing for it. Run `nbdev_clean` afterwards.

    python nbs/_record_cuda.py [NOTEBOOK ...]        (default: every notebook in nbs/)
"""
import json, os, sys, time
from pathlib import Path

os.environ['IN_TEST'] = '1'
from execnb.shell import CaptureShell
from fastcore.xtras import working_directory
from nbdev.frontmatter import FrontmatterProc
from nbdev.process import NBProcessor

NBS = Path(__file__).resolve().parent
SKIP = {'slow', 'notest'}


def directives(cell) -> set: return set(getattr(cell, 'directives_', None) or {})


def cuda_outputs(path: Path) -> dict:
    "Execute the notebook's cells (cuda included); return {cell id: outputs} of its cuda cells; raise on a failure."
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


def main(paths):
    import torch
    if not torch.cuda.is_available(): sys.exit('_record_cuda.py records GPU outputs: torch sees no CUDA device here')
    failed = []
    for path in paths or sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_')):
        path, t0 = Path(path).resolve(), time.time()
        try: outs = cuda_outputs(path)
        except RuntimeError as e: print(e, file=sys.stderr); failed.append(path.name); continue
        if outs: record(path, outs)
        print(f'{path.name}: {len(outs)} cuda cell(s) recorded in {time.time() - t0:.0f} s', flush=True)
    if failed: sys.exit(f'failed: {", ".join(failed)}')


if __name__ == '__main__': main(sys.argv[1:])
