"""DistributedDataParallel: `efficient-attention train` under `torchrun --nproc_per_node 2` (gloo on CPU) ends with the
same parameters on both ranks, and follows the single-process run with the same global batch.

The launch is the documented one (`python -m torch.distributed.run` is `torchrun`), with no code change between the
two runs: the script finds RANK / WORLD_SIZE in its environment and joins the process group itself.
"""
import json, os, subprocess, sys
from pathlib import Path

import pytest
import torch

from efficient_attention_nb.train import train, load_run

ROOT = Path(__file__).resolve().parents[1]
# a few steps of a small model: enough for Adam to move every parameter several times
ARGS = dict(steps=4, batch_size=8, dim=32, depth=2, heads=4, seed=3, sample_len=16)


def _cli_args(attn, task, out):
    a = ['train', '--attn', attn, '--task', task, '--steps', str(ARGS['steps']), '--batch-size', str(ARGS['batch_size']),
         '--dim', str(ARGS['dim']), '--depth', str(ARGS['depth']), '--heads', str(ARGS['heads']), '--seed', str(ARGS['seed']),
         '--sample-len', str(ARGS['sample_len']), '--no-progress', '--save-every-rank', '--device', 'cpu', '--out', str(out)]
    return a + (['--seq-len', '32'] if task == 'char' else [])


def _torchrun(args, nproc=2, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')}
    env['OMP_NUM_THREADS'] = '1'
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', str(nproc),
           '-m', 'efficient_attention_nb.cli', *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize('attn,task', [('softmax', 'char'), ('linear', 'recall')])
def test_two_processes_match_one(tmp_path, attn, task):
    if attn == 'linear': pytest.importorskip('efficient_attention_nb.linear_attention')
    r = _torchrun(_cli_args(attn, task, tmp_path / 'ddp'))
    assert r.returncode == 0, f'torchrun failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}'
    assert 'final loss' in r.stdout and 'sample:' in r.stdout, r.stdout
    assert r.stdout.count('final loss') == 1, 'only rank 0 should print the summary'

    # both ranks end with identical parameters
    s0 = torch.load(tmp_path / 'ddp' / 'model_rank0.pt', weights_only=True)['model']
    s1 = torch.load(tmp_path / 'ddp' / 'model_rank1.pt', weights_only=True)['model']
    assert s0.keys() == s1.keys()
    for k in s0: assert torch.equal(s0[k], s1[k]), f'{k} differs between rank 0 and rank 1'

    ddp = json.loads((tmp_path / 'ddp' / 'curve.json').read_text())
    assert ddp['world_size'] == 2 and len(ddp['curve']) == ARGS['steps']

    # one process, same global batch, same seed: the same losses and (nearly) the same parameters
    single = train(attn, task, seq_len=32 if task == 'char' else None, out=tmp_path / 'single', device='cpu', **ARGS)
    assert single['world_size'] == 1
    for step, (a, b) in enumerate(zip(ddp['curve'], single['curve'])):
        assert abs(a - b) <= 1e-4 * max(1., abs(b)), f'step {step}: loss {a} under DDP, {b} on one process'
    assert single['curve'][-1] < single['curve'][0], 'the loss should go down within a few steps'
    s_single = torch.load(tmp_path / 'single' / 'model.pt', weights_only=True)['model']
    for k in s0:
        torch.testing.assert_close(s0[k], s_single[k], rtol=1e-3, atol=1e-4, msg=lambda m: f'{k}: {m}')

    # the saved checkpoint rebuilds the model
    model, vocab, config = load_run(tmp_path / 'ddp')
    assert config['attn'] == attn and sum(p.numel() for p in model.parameters()) == ddp['params']
    assert (vocab is None) == (task == 'recall')


def test_batch_must_split_evenly(tmp_path):
    args = _cli_args('softmax', 'char', tmp_path / 'odd')
    args[args.index('--batch-size') + 1] = '7'
    r = _torchrun(args)
    assert r.returncode != 0
    assert '--batch-size (7) must be divisible by the number of processes (WORLD_SIZE) (2)' in r.stderr, r.stderr[-3000:]
    # each process exits with a usage error (status 2) and no traceback of ours; torchrun's launcher then reports the
    # failed child with a ChildFailedError traceback of its own, which is torch's behaviour for any failing child
    assert 'failed (exitcode: 2)' in r.stderr, r.stderr[-3000:]
    ours = [l for l in r.stderr.splitlines() if l.strip().startswith('File ') and 'efficient_attention_nb' in l]
    assert not ours, r.stderr[-3000:]


def _workers(parent:int) -> dict:
    "LOCAL_RANK → pid of the worker processes under the torchrun process `parent`."
    children, found = {}, {}
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try: pid, ppid = int(stat.parent.name), int(stat.read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError): continue
        children.setdefault(ppid, []).append(pid)
    todo = list(children.get(parent, []))
    while todo:
        pid = todo.pop(); todo += children.get(pid, [])
        try: text = (Path('/proc') / str(pid) / 'environ').read_text()
        except OSError: continue
        env = dict(l.split('=', 1) for l in text.split('\0') if '=' in l)
        if 'LOCAL_RANK' in env and 'TORCHELASTIC_RUN_ID' in env: found[int(env['LOCAL_RANK'])] = pid
    return found


@pytest.mark.slow
def test_a_signal_to_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    "SIGTERM to rank 1 alone: both ranks stop after the same step and checkpoint it; --resume under torchrun finishes."
    import signal, time
    args = _cli_args('softmax', 'char', tmp_path / 'ddp')
    args[args.index('--steps') + 1] = '400'
    args += ['--eval-every', '2']
    env = {k: v for k, v in os.environ.items()
           if k not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')} | {'OMP_NUM_THREADS': '1'}
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
           '-m', 'efficient_attention_nb.cli', *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    deadline = time.monotonic() + 300
    while not (tmp_path / 'ddp' / 'state.pt').exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = _workers(p.pid)
    assert sorted(workers) == [0, 1], workers
    os.kill(workers[1], signal.SIGTERM)
    out, err = p.communicate(timeout=300)
    assert p.returncode != 0 and 'exitcode: 143' in err, err[-3000:]
    assert err.count('stopped by SIGTERM after step') == 1, err[-3000:]          # rank 0 prints the one line
    step = json.loads((tmp_path / 'ddp' / 'curve.json').read_text())['steps']
    assert 2 <= step < 400 and f'after step {step} of 400' in err
    s0 = torch.load(tmp_path / 'ddp' / 'model_rank0.pt', weights_only=True)['model']
    s1 = torch.load(tmp_path / 'ddp' / 'model_rank1.pt', weights_only=True)['model']
    assert all(torch.equal(s0[k], s1[k]) for k in s0), 'the ranks stopped at different steps'
    r = _torchrun(['train', '--resume', str(tmp_path / 'ddp'), '--steps', str(step + 4), '--no-progress',
                   '--save-every-rank', '--device', 'cpu'])
    assert r.returncode == 0 and 'resumed at step' in r.stdout, r.stderr[-3000:]
    done = json.loads((tmp_path / 'ddp' / 'curve.json').read_text())
    assert done['steps'] == step + 4 and done['world_size'] == 2 and done['resumed_at'] == [step]


@pytest.mark.slow
@pytest.mark.parametrize('attn,extra', [('linear', []), ('delta', ['--gate', '--conv-size', '3']), ('transformer', []),
                                        ('transformer', ['--global-attn', 'delta'])])
def test_context_parallel_matches_one_process(tmp_path, attn, extra):
    "--context-parallel 2 under torchrun: each sequence split over two processes, the single process's losses."
    r = _torchrun(_cli_args(attn, 'char', tmp_path / 'cp') + ['--context-parallel', '2'] + extra)
    assert r.returncode == 0, f'torchrun failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}'
    cp = json.loads((tmp_path / 'cp' / 'curve.json').read_text())
    assert cp['world_size'] == 2 and cp['context_parallel'] == 2
    s0 = torch.load(tmp_path / 'cp' / 'model_rank0.pt', weights_only=True)['model']
    s1 = torch.load(tmp_path / 'cp' / 'model_rank1.pt', weights_only=True)['model']
    for k in s0: assert torch.equal(s0[k], s1[k]), f'{k} differs between rank 0 and rank 1'
    opts = {'delta': {'gate': True, 'conv_size': 3}, 'transformer': {'global_attn': 'delta'}}.get(attn) if extra else None
    single = train(attn, 'char', seq_len=32, attn_options=opts, out=tmp_path / 'single', device='cpu', **ARGS)
    for step, (a, b) in enumerate(zip(cp['curve'], single['curve'])):
        assert abs(a - b) <= 1e-5 * max(1., abs(b)), f'step {step}: loss {a} split over 2 processes, {b} on one'
    s_single = torch.load(tmp_path / 'single' / 'model.pt', weights_only=True)['model']
    for k in s0:             # as for DDP above: Adam divides by √v, so rounding in a tiny gradient moves a weight more
        torch.testing.assert_close(s0[k], s_single[k], rtol=1e-3, atol=1e-4, msg=lambda m: f'{k}: {m}')


def test_context_parallel_needs_processes_and_a_splittable_model():
    with pytest.raises(ValueError, match='launch under torchrun --nproc_per_node 2'):
        train('linear', 'char', seq_len=32, context_parallel=2, **ARGS)
    with pytest.raises(ValueError, match="attn='linear', 'delta' or 'transformer'"):
        train('softmax', 'char', seq_len=32, context_parallel=2, **ARGS)
