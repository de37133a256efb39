"""The optional extra `[hf]`: declared once in settings.ini, passed by setup.py, and in `[dev]` so that CI runs the
Hugging Face chapter. The chapter itself (nbs/12_hf.ipynb) holds the tests of the classes."""
import configparser, os, runpy, shlex, subprocess, sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]


def _settings() -> dict:
    cfg = configparser.ConfigParser(delimiters=['='])
    cfg.read(ROOT / 'settings.ini', encoding='utf-8')
    return cfg['DEFAULT']


def test_the_extra_is_declared_and_in_dev():
    s = _settings()
    hf, dev = shlex.split(s['hf_requirements']), shlex.split(s['dev_requirements'])
    assert sorted(r.split('>')[0] for r in hf) == ['safetensors', 'transformers'], hf
    assert set(hf) <= set(dev), (hf, dev)


def test_setup_passes_the_extra():
    seen = {}
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)                                                   # setup.py reads settings.ini and README.md
        with mock.patch('setuptools.setup', lambda **kw: seen.update(kw)): runpy.run_path(str(ROOT / 'setup.py'))
    finally: os.chdir(cwd)
    assert seen['extras_require']['hf'] == shlex.split(_settings()['hf_requirements'])


def test_without_transformers_the_package_imports_and_hf_names_the_extra():
    hide = "import sys; sys.modules['transformers'] = None; "
    r = subprocess.run([sys.executable, '-c', hide + 'import efficient_attention_nb'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, '-c', hide + 'import efficient_attention_nb.hf'], capture_output=True, text=True)
    assert r.returncode == 1 and "pip install 'efficient_attention_nb[hf]'" in r.stderr, r.stderr
