"""Packaging: the wheel holds only the library, installs into a fresh virtual environment with the runtime
requirements alone (no nbdev, jupyter or pytest), and every seed README example runs from it."""
import os, re, subprocess, sys, zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / 'tests' / 'seed_examples').glob('*.py'))
SEEDS = ROOT.parent / 'shared' / 'seeds'
TORCH_SPEC = os.environ.get('TORCH_SPEC', 'torch==2.13.0')


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f'{" ".join(map(str, cmd))} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}'
    return r


@pytest.fixture(scope='module')
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp('wheel')
    _run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', '-w', str(out), str(ROOT)])
    (whl,) = out.glob('efficient_attention_nb-*.whl')
    return whl


@pytest.fixture(scope='module')
def runtime_venv(wheel, tmp_path_factory):
    "A fresh venv with the wheel and its runtime requirements only."
    venv = tmp_path_factory.mktemp('venv')
    _run([sys.executable, '-m', 'venv', str(venv)])
    py = venv / 'bin' / 'python'
    pip = [str(py), '-m', 'pip', 'install', '-q', '--disable-pip-version-check']
    _run(pip + [TORCH_SPEC])                       # the local CPU build here; see the README for GPU machines
    _run(pip + [str(wheel)])
    return py


@pytest.mark.slow
def test_wheel_contains_only_the_library(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n == 'efficient_attention_nb/core.py' for n in names), names
    assert not [n for n in names if n.endswith('.ipynb') or n.startswith(('tests/', 'nbs/'))], names


@pytest.mark.slow
def test_runtime_venv_has_no_dev_tools(runtime_venv):
    r = _run([str(runtime_venv), '-m', 'pip', 'list', '--format=freeze'])
    installed = {l.split('==')[0].lower() for l in r.stdout.splitlines()}
    assert {'torch', 'einops', 'fastcore', 'efficient-attention-nb'} <= installed, installed
    assert not installed & {'nbdev', 'jupyterlab', 'notebook', 'pytest', 'execnb'}, installed


@pytest.mark.slow
@pytest.mark.parametrize('example', EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_seed_example_runs_from_the_wheel(runtime_venv, example, tmp_path):
    r = subprocess.run([str(runtime_venv), str(example)], capture_output=True, text=True, cwd=tmp_path, timeout=900,
                       env={**os.environ, 'OMP_NUM_THREADS': '2'})
    assert r.returncode == 0, f'{example.name}:\n{r.stderr[-4000:]}'


def test_import_leaves_the_compiler_unloaded():
    """The package and its command line import without torch's compiler (dynamo, inductor): each CLI call and
    notebook kernel starts in about two seconds, not six; the compiler loads at the first `torch.compile`."""
    code = ("import sys, efficient_attention_nb, efficient_attention_nb.cli, efficient_attention_nb.train; "
            "print([m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules])")
    assert _run([sys.executable, '-c', code]).stdout.strip() == '[]'


@pytest.mark.skipif(not SEEDS.is_dir(), reason='../shared/seeds is not beside this clone (only the project checkout has it)')
def test_seed_examples_match_the_seed_readmes():
    "The copies above are the seeds' code blocks with only the import line (and .cuda()) changed: no drift."
    for example in EXAMPLES:
        if example.stem.startswith(('lmha', 'compositional')): continue   # seeds 002 and 003 have no python block
        seed_file = next(SEEDS.glob(re.search(r'of (\S+\.txt)', example.read_text()).group(1)))
        blocks = re.findall(r'```(?:python|py)\n(.*?)```', seed_file.read_text(), re.S)
        body = example.read_text().split('\n', 1)[1].split('\n\n# added:')[0]
        norm = lambda s: re.sub(r'from \S+ import', 'from X import', s.replace('.cuda()', '')).strip()
        assert blocks, f'{seed_file.name} has no python code block to compare {example.name} with'
        assert any(norm(b) == norm(body) for b in blocks), example.name
