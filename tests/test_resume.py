"""Runs you can trust: an interrupted and resumed run equals the uninterrupted one exactly (CPU, one thread), signals
end the command with one line and 130/143, a full disk keeps the previous checkpoint, and `--resume` refuses what
it cannot continue, naming the option.

Fast: tiny models, a few steps; the console script runs in a fresh process only where a real signal is the point."""
import contextlib, errno, io, json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest
import torch

from efficient_attention_nb.cli import main
from efficient_attention_nb.train import (STATE_FORMAT, TrainingInterrupted, load_run, load_training_state, resume,
                                          train)

SMALL = dict(steps=10, batch_size=8, dim=16, heads=2, depth=1, eval_every=3, sample_len=8)


def run(*argv):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e): rc = main([str(a) for a in argv])
    return rc, o.getvalue(), e.getvalue()


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _stop_at(k, sig=signal.SIGINT):
    def on_step(step, loss):
        if step == k: signal.raise_signal(sig)
    return on_step


def _weights(path):
    return torch.load(path, weights_only=True)['model']


@pytest.mark.parametrize('attn,task,dtype,k', [('softmax', 'char', 'float32', 0), ('softmax', 'char', 'float32', 5),
                                               ('linear', 'recall', 'float32', 7), ('delta', 'char', 'float16', 3),
                                               ('transformer', 'char', 'bfloat16', 2)])
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, one_thread, attn, task, dtype, k):
    kw = dict(SMALL, task=task, dtype=dtype, **({'seq_len': 16} if task == 'char' else {'n_pairs': 6}))
    whole = train(attn, out=tmp_path / 'whole', **kw)
    with pytest.raises(TrainingInterrupted) as e:
        train(attn, out=tmp_path / 'cut', on_step=_stop_at(k), **kw)
    assert e.value.step == k + 2 and e.value.exit_status == 130
    again = resume(tmp_path / 'cut')
    assert again['curve'] == whole['curve'] and again['evals'] == whole['evals']
    assert again['val_loss'] == whole['val_loss'] and again['sample'] == whole['sample']
    assert again['resumed_at'] == [k + 2] and again['best'] == whole['best']
    for name in ('model.pt', 'best.pt'):
        a, b = _weights(tmp_path / 'whole' / name), _weights(tmp_path / 'cut' / name)
        assert all(torch.equal(a[key], b[key]) for key in a), name
    sa, sb = (load_training_state(tmp_path / d) for d in ('whole', 'cut'))
    for key in ('optimizer', 'scheduler', 'scaler'):
        assert str(sa[key]) == str(sb[key]), key                      # same moments, schedule position, loss scale


def test_twice_interrupted(tmp_path, one_thread):
    kw = dict(SMALL, task='recall', n_pairs=6)
    whole = train('softmax', out=tmp_path / 'whole', **kw)
    with pytest.raises(TrainingInterrupted): train('softmax', out=tmp_path / 'cut', on_step=_stop_at(1), **kw)
    with pytest.raises(TrainingInterrupted) as e: resume(tmp_path / 'cut', on_step=_stop_at(5, signal.SIGTERM))
    assert e.value.step == 7 and e.value.exit_status == 143
    again = resume(tmp_path / 'cut')
    assert again['curve'] == whole['curve'] and again['resumed_at'] == [3, 7] and again['evals'] == whole['evals']


def test_more_steps_keep_the_schedule(tmp_path, one_thread):
    kw = dict(SMALL, task='recall', n_pairs=6)
    first = train('softmax', out=tmp_path / 'r', **kw)
    more = resume(tmp_path / 'r', steps=13)
    assert more['curve'][:10] == first['curve'] and len(more['curve']) == 13
    assert [e['step'] for e in more['evals']] == [3, 6, 9, 10, 12, 13]
    sched = load_training_state(tmp_path / 'r')['scheduler']
    assert sched['last_epoch'] == 13 and abs(sched['_last_lr'][0] - 1e-3) < 1e-12      # past the decay: min_lr
    with pytest.raises(ValueError, match='steps must be more than the 13 steps'): resume(tmp_path / 'r', steps=13)


def test_bad_resume_folders(tmp_path):
    assert run('train', '--attn', 'softmax', '--task', 'recall', '--pairs', '6', '--steps', '2', '--dim', '16',
               '--heads', '2', '--batch-size', '4', '--no-progress', '--out', tmp_path / 'r')[0] == 0
    (tmp_path / 'empty').mkdir(); (tmp_path / 'file').write_text('x')
    (tmp_path / 'legacy').mkdir()
    (tmp_path / 'legacy' / 'model.pt').write_bytes((tmp_path / 'r' / 'model.pt').read_bytes())
    (tmp_path / 'damaged').mkdir(); (tmp_path / 'damaged' / 'state.pt').write_bytes(b'PK\x03\x04 not really')
    st = load_training_state(tmp_path / 'r')
    (tmp_path / 'future').mkdir()
    torch.save(st | {'format': 'efficient_attention_nb.train/state-9', 'version': '9.0'},
               tmp_path / 'future' / 'state.pt')
    (tmp_path / 'foreign').mkdir(); torch.save({'step': 3}, tmp_path / 'foreign' / 'state.pt')
    for folder, message in [('nowhere', 'is not a run folder: it does not exist'), ('file', 'it is a file'),
                            ('empty', 'it holds no state.pt'), ('legacy', 'holds a model.pt but no state.pt'),
                            ('damaged', 'is damaged or not a training state'),
                            ('future', f"written by efficient_attention_nb 9.0 in the format "
                                       f"'efficient_attention_nb.train/state-9'; this version"),
                            ('foreign', 'is not a training state of efficient_attention_nb.train')]:
        rc, o, e = run('train', '--resume', tmp_path / folder)
        assert rc == 2 and message in e and e.startswith('efficient-attention train: error: --resume: '), e
        assert e.count('\n') == 1 and 'Traceback' not in e
    assert STATE_FORMAT.endswith('state-1')


def test_resume_refuses_contradictions(tmp_path):
    base = ['--attn', 'delta', '--gate', '--seq-len', '16', '--steps', '2', '--dim', '16', '--heads', '2',
            '--batch-size', '4', '--sample-len', '4', '--no-progress', '--lr', '0.002']
    assert run('train', *base, '--out', tmp_path / 'r')[0] == 0
    for args, message in [(['--attn', 'linear'], '--attn linear contradicts the run'),
                          (['--seq-len', '32'], 'which was trained with --seq-len 16; leave --seq-len out'),
                          (['--no-out-norm'], '--no-out-norm contradicts the run'),
                          (['--lr', '0.003'], 'trained with --lr 0.002'), (['--seed', '1'], '--seed 1 contradicts'),
                          (['--batch-size', '8'], '--batch-size 8 contradicts'),
                          (['--task', 'recall'], '--task recall'),
                          (['--text', tmp_path / 'x.txt'], 'contradicts the run'),
                          (['--force'], '--force does not apply'),
                          (['--steps', '2'], '--steps must be more than the 2 steps')]:
        rc, o, e = run('train', '--resume', tmp_path / 'r', *args)
        assert rc == 2 and message in e and e.count('\n') == 1, (args, e)
    rc, o, e = run('train', '--resume', tmp_path / 'r', *base, '--steps', '3', '--eval-every', '1')   # agreeing
    assert rc == 0 and 'resumed at step 2' in o, e
    assert [v['step'] for v in json.loads((tmp_path / 'r' / 'curve.json').read_text())['evals']] == [2, 3]


def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    real, calls = torch.save, []
    def save(obj, f, *a, **k):
        calls.append(1)
        if len(calls) > 3: f.write(b'PK\x03'); raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(obj, f, *a, **k)
    monkeypatch.setattr(torch, 'save', save)
    rc, o, e = run('train', '--attn', 'softmax', '--seq-len', '16', '--steps', '6', '--eval-every', '2', '--dim', '16',
                   '--heads', '2', '--batch-size', '4', '--no-progress', '--out', tmp_path / 'r')
    assert rc == 1 and e.count('\n') == 1 and 'Traceback' not in e, e
    assert f"could not write {tmp_path / 'r' / 'state.pt'}: No space left on device; the checkpoint of step 2" in e, e
    monkeypatch.setattr(torch, 'save', real)
    assert load_training_state(tmp_path / 'r')['progress']['step'] == 2
    assert not list((tmp_path / 'r').glob('.*.tmp'))
    rc, o, e = run('train', '--resume', tmp_path / 'r', '--no-progress')
    assert rc == 0 and 'resumed at step 2' in o, e


def _cli(out, *extra):
    return [sys.executable, '-m', 'efficient_attention_nb.cli', 'train', '--attn', 'linear', '--seq-len', '32',
            '--steps', '400', '--dim', '16', '--heads', '2', '--batch-size', '8', '--eval-every', '2',
            '--threads', '1', '--out', str(out), *extra]


@pytest.mark.parametrize('sig,status', [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_with_one_line(tmp_path, sig, status):
    p = subprocess.Popen(_cli(tmp_path / 'r'), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / 'r' / 'state.pt').exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    lines = [l for l in err.replace('\r', '\n').splitlines() if l.startswith('efficient-attention')]
    assert p.returncode == status, err[-2000:]
    assert 'Traceback' not in err and len(lines) == 1, err[-2000:]
    assert f'stopped by {signal.Signals(sig).name} after step' in lines[0]
    assert lines[0].endswith(f'resume with: efficient-attention train --resume {tmp_path / "r"}')
    step = load_training_state(tmp_path / 'r')['progress']['step']
    assert f'after step {step} of 400' in lines[0]
    assert json.loads((tmp_path / 'r' / 'curve.json').read_text())['steps'] == step
    assert 'tok/s' in err                                                        # the bar: tokens/s and time left


@pytest.mark.slow
def test_compiled_run_resumes_exactly(tmp_path, one_thread):
    "--compile: recorded, and an interrupted compiled run resumes to the same curve (compiling takes ~20 s on a CPU)."
    kw = dict(SMALL, task='recall', n_pairs=6, steps=6, eval_every=2, compile=True)
    whole = train('softmax', out=tmp_path / 'whole', **kw)
    assert whole['config']['compile'] and load_run(tmp_path / 'whole').config['compile']
    with pytest.raises(TrainingInterrupted): train('softmax', out=tmp_path / 'cut', on_step=_stop_at(1), **kw)
    again = resume(tmp_path / 'cut')
    assert again['curve'] == whole['curve'] and again['val_loss'] == whole['val_loss']
