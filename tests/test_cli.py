"""The `efficient-attention` command: bad inputs end in one line naming the option (exit status 2, no traceback),
the checkpoint round trip through `torch.load(..., weights_only=True)`, and `generate`.

Fast: tiny models and a few steps; the console script runs in a fresh process only where that is the point."""
import contextlib, csv, io, json, subprocess, sys
from pathlib import Path

import pytest
import torch

from efficient_attention_nb import __version__
from efficient_attention_nb.cli import main
from efficient_attention_nb.train import ATTENTIONS, CHECKPOINT_FORMAT, load_run, make_model

TINY = ['--steps', '2', '--dim', '16', '--heads', '2', '--depth', '1', '--batch-size', '4', '--sample-len', '5',
        '--no-progress', '--device', 'cpu']


def run(*argv):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e): rc = main([str(a) for a in argv])
    return rc, o.getvalue(), e.getvalue()


def refused(rc, err, message):
    assert rc == 2, err
    assert message in err, err
    assert 'Traceback' not in err and err.count('\n') == 1, err        # one line


def test_version_and_help():
    rc, o, _ = run('--version')
    assert rc == 0 and o.strip() == f'efficient-attention {__version__}'
    rc, o, _ = run('train', '--help')
    assert rc == 0 and '(default: 300)' in o and '--text PATH' in o and '(default: None)' not in o


@pytest.mark.parametrize('opt,value,message', [
    ('--seq-len', '0', '--seq-len must be >= 1, got 0'),
    ('--batch-size', '0', '--batch-size must be >= 1, got 0'),
    ('--steps', '0', '--steps must be >= 1, got 0'),
    ('--lr', '-1', '--lr must be >= 0.0, got -1.0'),
    ('--grad-clip', '-1', '--grad-clip must be >= 0.0'),
    ('--beta1', '1.5', '--beta1 must be < 1.0, got 1.5'),
    ('--val-fraction', '0', '--val-fraction must be > 0'),
    ('--warmup', '5', '--warmup must be <= 2, got 5'),
    ('--heads', '3', '--dim (16) must be divisible by --heads (3)'),
    ('--device', 'nonsense', "--device 'nonsense' is not a device"),
])
def test_bad_train_options_name_the_option(tmp_path, opt, value, message):
    rc, o, e = run('train', '--attn', 'softmax', '--seq-len', '16', *TINY, opt, value, '--out', tmp_path / 'r')
    refused(rc, e, message)
    assert not (tmp_path / 'r').exists()


def test_seq_len_8_trains_and_samples_in_full(tmp_path):
    rc, o, e = run('train', '--attn', 'softmax', *TINY, '--seq-len', '8', '--sample-len', '40', '--out', tmp_path / 'r')
    assert rc == 0, e
    assert len(json.loads((tmp_path / 'r' / 'curve.json').read_text())['sample']) == 16 + 40     # no clipping


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the message for a machine without CUDA')
def test_cuda_without_cuda(tmp_path):
    rc, o, e = run('train', *TINY, '--device', 'cuda', '--out', tmp_path / 'r')
    refused(rc, e, '--device cuda: CUDA is not available on this machine; use --device cpu')


def test_existing_output_folder_needs_force(tmp_path):
    out = tmp_path / 'r'
    out.mkdir(); (out / 'notes.txt').write_text('mine')
    refused(*run('train', '--attn', 'softmax', '--seq-len', '16', *TINY, '--out', out)[::2],
            'already exists and is not empty; add --force')
    assert run('train', '--attn', 'softmax', '--seq-len', '16', *TINY, '--out', out, '--force')[0] == 0
    assert (out / 'notes.txt').read_text() == 'mine' and (out / 'model.pt').exists()


def test_text_file_problems(tmp_path):
    (tmp_path / 'empty.txt').write_bytes(b'')
    (tmp_path / 'short.txt').write_text('too short')
    for path, message in [(tmp_path / 'missing.txt', 'does not exist'), (tmp_path / 'empty.txt', 'is empty'),
                          (tmp_path / 'short.txt', 'fewer than one window of --seq-len + 1 = 17')]:
        refused(*run('train', '--seq-len', '16', *TINY, '--text', path, '--out', tmp_path / 'r')[::2], message)
    (tmp_path / 'latin1.txt').write_bytes('na\xefve r\xe9sum\xe9 '.encode('latin-1') * 50)
    rc, o, e = run('train', '--attn', 'linear', '--seq-len', '16', *TINY, '--text', tmp_path / 'latin1.txt',
                   '--out', tmp_path / 'r')
    assert rc == 0 and '150 invalid byte sequence(s), the first at byte 2' in e, e
    assert '\ufffd' in load_run(tmp_path / 'r').vocab.chars


def test_recall_rejects_text(tmp_path):
    refused(*run('train', '--task', 'recall', *TINY, '--text', 'x.txt', '--out', tmp_path / 'r')[::2],
            "--seq-len and --text apply to task='char'")


@pytest.mark.parametrize('attn', ATTENTIONS)
def test_checkpoint_round_trip(tmp_path, attn):
    task = 'recall' if attn == 'linformer' else 'char'
    extra = ['--pairs', '6'] if task == 'recall' else ['--seq-len', '16']
    rc, o, e = run('train', '--attn', attn, '--task', task, *TINY, *extra, '--out', tmp_path / 'r')
    assert rc == 0, e
    ckpt = torch.load(tmp_path / 'r' / 'model.pt', weights_only=True)          # plain data, no pickled classes
    assert ckpt['format'] == CHECKPOINT_FORMAT and set(ckpt) == {'format', 'config', 'vocab', 'model'}
    model, vocab, config = load_run(tmp_path / 'r')
    assert not model.training and config['attn'] == attn
    fresh = make_model(attn, task, num_tokens=config['num_tokens'], seq_len=config['seq_len'], dim=16, depth=1,
                       heads=2)
    fresh.load_state_dict(ckpt['model'])
    x = torch.randint(0, config['num_tokens'], (2, config['seq_len']))
    torch.testing.assert_close(model(x), fresh.eval()(x))
    result = json.loads((tmp_path / 'r' / 'curve.json').read_text())
    assert result['config'] == config and isinstance(result['val_loss'], float)
    if task == 'char':
        assert vocab is not None and len(vocab) == config['num_tokens']
        rc, o, e = run('generate', tmp_path / 'r', '--prompt', 'the', '--max-new-tokens', '50', '--temperature', '0')
        assert rc == 0 and len(o) == 51, e                                   # past max_seq_len = 16
        assert o[:-1] == vocab.decode(model.generate(vocab.encode('the')[None], 50, temperature=0)[0])
    else:
        assert vocab is None
        refused(*run('generate', tmp_path / 'r', '--prompt', 'a')[::2], "holds a 'recall' model")


def test_generate_uses_the_recurrent_step(tmp_path):
    assert run('train', '--attn', 'linear', '--seq-len', '8', *TINY, '--out', tmp_path / 'r')[0] == 0
    model, vocab, _ = load_run(tmp_path / 'r')
    calls = {'step': 0}
    step = model.body.step
    def counting_step(*a, **k):
        calls['step'] += 1
        return step(*a, **k)
    model.body.step = counting_step
    model.body.forward = lambda *a, **k: pytest.fail('the parallel forward should not run while generating')
    new = model.generate(vocab.encode('the')[None], 30, temperature=0)
    assert new.shape == (1, 30) and calls['step'] > 20                        # O(1) steps, re-reads past position 8


def test_generate_bad_inputs(tmp_path):
    assert run('train', '--attn', 'softmax', '--seq-len', '16', *TINY, '--out', tmp_path / 'r')[0] == 0
    for args, message in [(['--prompt', 'XYZ'], '--prompt: the text has 3 character(s) outside the vocabulary'),
                          (['--prompt', 'a', '--max-new-tokens', '-1'], '--max-new-tokens must be >= 0, got -1'),
                          (['--prompt', 'a', '--top-k', '0'], '--top-k must be >= 1, got 0'),
                          (['--prompt', 'a', '--temperature', '-0.5'], '--temperature must be >= 0.0')]:
        refused(*run('generate', tmp_path / 'r', *args)[::2], message)
    refused(*run('generate', tmp_path / 'nothing', '--prompt', 'a')[::2], 'no checkpoint at')
    (tmp_path / 'bare.pt').write_bytes(b'')
    torch.save({'w': torch.zeros(1)}, tmp_path / 'bare.pt')
    refused(*run('generate', tmp_path / 'bare.pt', '--prompt', 'a')[::2], 'is not a checkpoint of')
    (tmp_path / 'corrupt.pt').write_bytes(b'not a zip archive' * 8)              # a damaged or foreign file
    refused(*run('generate', tmp_path / 'corrupt.pt', '--prompt', 'a')[::2], 'is not a checkpoint of')


def test_console_script_prints_no_traceback(tmp_path):
    p = subprocess.run([sys.executable, '-m', 'efficient_attention_nb.cli', 'train', '--text', str(tmp_path / 'no.txt'),
                        '--out', str(tmp_path / 'r')], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stdout == ''
    assert p.stderr.startswith('efficient-attention train: error: --text:') and 'Traceback' not in p.stderr


def test_export_hf_round_trip_and_refusals(tmp_path):
    "A transformer run becomes a folder that transformers loads with the same logits; anything else is one line."
    pytest.importorskip('transformers')
    import efficient_attention_nb.hf                                       # registers the classes
    from transformers import AutoModelForCausalLM, AutoTokenizer
    assert run('train', '--attn', 'transformer', *TINY, '--seq-len', '8', '--out', tmp_path / 'tf')[0] == 0
    rc, o, e = run('export-hf', tmp_path / 'tf', tmp_path / 'hf')
    assert (rc, e) == (0, ''), e
    model, vocab, _ = load_run(tmp_path / 'tf')
    ids = vocab.encode('the fox')[None]
    with torch.no_grad():
        assert torch.equal(AutoModelForCausalLM.from_pretrained(tmp_path / 'hf')(ids).logits, model(ids))
    assert AutoTokenizer.from_pretrained(tmp_path / 'hf')('the fox').input_ids == ids[0].tolist()
    refused(*run('export-hf', tmp_path / 'tf', tmp_path / 'hf')[::2], 'already exists and is not empty; add --force')
    refused(*run('export-hf', tmp_path / 'nowhere', tmp_path / 'x')[::2], 'no checkpoint at')
    assert run('train', '--attn', 'softmax', *TINY, '--seq-len', '8', '--out', tmp_path / 'sm')[0] == 0
    refused(*run('export-hf', tmp_path / 'sm', tmp_path / 'y')[::2], "export-hf needs attn='transformer'")


def test_bench_fresh_process_memory_agrees_with_the_fork(tmp_path):
    "`bench --fresh-process` (one fresh Python per reading) and the default (forks of one prepared child) agree."
    for extra, sub in (([], 'fork'), (['--fresh-process'], 'fresh')):
        rc, o, e = run('bench', '--n', '2048', '--mechanisms', 'linear', '--repeats', '1', '--warmup', '0', '--no-progress',
                       '--dim', '256', '--heads', '4', '--out', tmp_path / sub, *extra)
        assert rc == 0, e
    rows = {sub: list(csv.DictReader(open(tmp_path / sub / 'bench.csv'))) for sub in ('fork', 'fresh')}
    assert [(r['mechanism'], r['n']) for r in rows['fork']] == [(r['mechanism'], r['n']) for r in rows['fresh']]
    mem = {sub: {r['mechanism']: float(r['mem_fwd_mb']) for r in rs} for sub, rs in rows.items()}
    assert mem['fresh']['linear'] > 4 and abs(mem['fresh']['linear'] - mem['fork']['linear']) < 1, mem   # MiB
