"""The house rules that a reader of the notebooks, the docs site or `help()` would notice, checked on the sources.

Cell sizes and line widths (CONVENTIONS §2), documented arguments reaching `help()` (§3), prose that names papers
and projects instead of development jargon, saved outputs without progress frames, warnings or machine paths,
no function longer than 60 lines, and the two layers: the top-level namespace is the library only.
Prose within its budget (a chapter is a lesson, not a log), and no code cell that reads a name before it exists.
Everything here reads files or imports the package: it runs in seconds.
"""
import ast, importlib, inspect, json, re, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted(p for p in (ROOT / 'nbs').glob('*.ipynb') if not p.name.startswith('_'))
PKG = ROOT / 'efficient_attention_nb'
HARNESS = ('bench', 'train', 'cli')
JARGON = re.compile(r"\bthe seed\b|\bseed's\b|\bthe issue\b|the reference implementation|while writing|on this machine"
                    r"|this shared machine|load average", re.I)
PROGRESS = re.compile(r'\d+it/s\]|\d+%\|[^\n]*\|')
PATHS = re.compile(r'/(?:work|home|root|tmp)/\S+')


def cells(nb: Path):
    return json.loads(nb.read_text())['cells']


def src(cell) -> str:
    return ''.join(cell['source'])


def code_lines():
    for nb in NBS:
        for c in cells(nb):
            if c['cell_type'] == 'code':
                for line in src(c).splitlines(): yield nb.name, line


@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_cells_are_small(nb):
    "An exported cell holds one idea in at most 40 lines; no code cell is over 60."
    big = []
    for i, c in enumerate(cells(nb)):
        if c['cell_type'] != 'code': continue
        s = src(c); n = len(s.splitlines())
        exported = re.match(r'#\|\s*export', s) is not None
        if n > 60 or (exported and n > 40): big.append((i, c.get('id'), n, 'exported' if exported else 'code'))
    assert not big, f'{nb.name}: cells over the limit (index, id, lines, kind): {big}'


def test_code_lines_fit_the_page():
    "At most 2% of code lines over 120 characters, and none in the exported library."
    lines = list(code_lines())
    over = [(nb, l) for nb, l in lines if len(l) > 120]
    assert len(over) <= 0.02 * len(lines), f'{len(over)} of {len(lines)} code lines over 120 characters: {over[:10]}'
    generated = re.compile(r"^(# %%|__all__ = |\s+'\w+',|\"\"\")")                  # nbdev's own header lines
    lib = [(p.name, l) for p in PKG.glob('*.py') if p.name != '_modidx.py'
           for l in p.read_text().splitlines() if len(l) > 120 and not generated.match(l)]
    assert not lib, f'library lines over 120 characters: {lib[:10]}'


@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_prose_speaks_to_the_reader(nb):
    "Papers and projects are named; no undefined jargon ('the seed', 'the issue') or development-log narration."
    hits = [(i, m.group(0)) for i, c in enumerate(cells(nb)) if c['cell_type'] == 'markdown'
            for m in JARGON.finditer(src(c))]
    assert not hits, f'{nb.name}: {hits}'


@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_saved_outputs_are_clean(nb):
    "No progress-bar frames, warnings or local paths in saved outputs."
    bad = []
    for i, c in enumerate(cells(nb)):
        for o in c.get('outputs', []):
            text = ''.join(o.get('text', '')) + ''.join(o.get('data', {}).get('text/plain', ''))
            if o.get('name') == 'stderr': bad.append((i, 'stderr', text[:80]))
            if PROGRESS.search(text): bad.append((i, 'progress bar', PROGRESS.search(text).group(0)))
            if 'Warning' in text: bad.append((i, 'warning', text[text.index('Warning') - 40:][:100]))
            if PATHS.search(text): bad.append((i, 'path', PATHS.search(text).group(0)))
    assert not bad, f'{nb.name}: {bad[:8]}'


def _functions(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_function_over_60_lines():
    long = [(p.name, name, n) for p in PKG.glob('*.py') if p.name != '_modidx.py'
            for name, n in _functions(p) if n > 60]
    assert not long, long


def _public_modules():
    import efficient_attention_nb as top
    mods = [importlib.import_module(f'efficient_attention_nb.{p.stem}') for p in sorted(PKG.glob('*.py'))
            if not p.name.startswith('_')]
    return top, mods


def _callables():
    "Every public class, function and public method defined in the package's modules."
    _, mods = _public_modules()
    for m in mods:
        for name in getattr(m, '__all__', []):
            obj = getattr(m, name)
            if getattr(obj, '__module__', None) != m.__name__: continue
            if inspect.isfunction(obj): yield f'{m.__name__}.{name}', obj
            elif inspect.isclass(obj):
                yield f'{m.__name__}.{name}', obj
                for mname, meth in vars(obj).items():
                    if inspect.isfunction(meth) and not mname.startswith('_'): yield f'{m.__name__}.{name}.{mname}', meth


def _undocumented(obj):
    "Arguments without a docment; a class is judged by the `__init__` it defines (NamedTuples and exceptions have none)."
    from fastcore.docments import docments
    if inspect.isclass(obj) and '__init__' not in vars(obj) and not hasattr(obj, '__dataclass_fields__'): return []
    init = vars(obj).get('__init__') if inspect.isclass(obj) else None
    if inspect.isfunction(init) and not init.__code__.co_filename.startswith('<'): obj = init   # written, not generated
    try: d = docments(obj, full=True, args_kwargs=True)
    except (TypeError, ValueError): return []
    return [k for k, v in d.items() if k not in ('self', 'cls', 'return') and not v['docment']]


def _arguments(obj) -> list:
    "The arguments a caller passes (no self/cls); none for a class whose signature is torch's or a builtin's."
    try: return [p for p in inspect.signature(obj).parameters if p not in ('self', 'cls')]
    except (TypeError, ValueError): return []


def test_every_argument_is_documented():
    missing = {name: u for name, obj in _callables() if (u := _undocumented(obj))}
    assert not missing, f'{len(missing)} callables with undocumented arguments: {missing}'


def test_help_shows_the_arguments():
    "The docments reach help() and IDE hovers: every public class and function has an Args list in its docstring."
    missing = [name for name, obj in _callables() if _undocumented(obj) == [] and _arguments(obj)
               and '\nArgs:\n' not in (obj.__doc__ or '')]
    assert not missing, missing
    from efficient_attention_nb import LinformerSelfAttention
    import pydoc
    text = pydoc.render_doc(LinformerSelfAttention, renderer=pydoc.plaintext)
    assert 'seq_len (int): ' in text, text[:2000]


def test_top_level_is_the_library():
    "Harness names are reached through their modules; no top-level name hides a submodule."
    top, mods = _public_modules()
    public = {n for n in dir(top) if not n.startswith('_')}
    submodules = {m.__name__.rsplit('.', 1)[1] for m in mods}
    harness = set()
    for h in HARNESS:
        try: harness |= set(importlib.import_module(f'efficient_attention_nb.{h}').__all__)
        except ModuleNotFoundError: pass
    shadow = {n for n in public & submodules if not inspect.ismodule(getattr(top, n))}
    assert not shadow, f'top-level names that hide a submodule: {shadow}'
    names = {n for n in public if not inspect.ismodule(getattr(top, n))}      # a submodule, once imported, is an attribute
    assert not names & harness, f'harness names at the top level: {sorted(names & harness)}'


def test_import_loads_no_harness_dependencies():
    "The package adds neither the harness nor its dependencies to what `import torch` already loads (torch 2.13 loads tqdm)."
    code = ('import sys, torch; before = set(sys.modules); import efficient_attention_nb; new = set(sys.modules) - before; '
            'print(sorted(m for m in new if m.split(".")[0] in ("tqdm", "matplotlib") or m.startswith('
            '("efficient_attention_nb.bench", "efficient_attention_nb.train", "efficient_attention_nb.cli"))))')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == '[]', r.stdout


def test_the_library_never_imports_the_harness():
    for p in PKG.glob('*.py'):
        if p.stem in HARNESS or p.name.startswith('_'): continue
        bad = re.findall(r'^\s*(?:from|import)\s+\S*\b(?:bench|train|cli)\b.*$', p.read_text(), re.M)
        assert not bad, f'{p.name} imports the harness: {bad}'


@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_cell_ids_are_unique(nb):
    "nbformat silently renames a duplicate cell id when it reads the notebook, so links and records to it break."
    ids = [c.get('id') for c in cells(nb)]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f'{nb.name}: cell ids used more than once: {dup}'


# --- prose budgets -------------------------------------------------------------------------------------------------
# The anchors: the annotated transformer teaches a whole transformer in about 4,300 words of prose, the annotated S4
# in about 5,800. A chapter here has at most 5,000 (the GPU chapter 6,000); one markdown cell at most 200.
BUDGET, GPU_BUDGET, CELL_BUDGET = 5000, 6000, 200
GPU_CHAPTERS = {'06b_hardware'}
_MATH = re.compile(r'\$\$.*?\$\$|\$[^$\n]+\$', re.S)
_FENCED = re.compile(r'```.*?```', re.S)
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


def prose_words(markdown: str) -> int:
    "Words of prose in a markdown cell: math, fenced code, table rows, HTML tags and link targets left out."
    s = _FENCED.sub(' ', _MATH.sub(' ', markdown))
    s = '\n'.join(l for l in s.splitlines() if not l.lstrip().startswith('|'))
    s = re.sub(r'\]\([^)]*\)', ']', re.sub(r'<[^>]+>', ' ', s))
    return len(_WORD.findall(s))


def test_prose_words_counts_prose_only():
    md = 'One $x^2$ two [three](https://a.b/c d e) `four`\n\n$$\na + b\n$$\n| a | b |\n|---|---|\n<b>five</b>\n```\nsix\n```'
    assert prose_words(md) == 5, prose_words(md)


def test_chapters_within_their_prose_budget():
    counts = {nb.stem: [(c.get('id'), prose_words(src(c))) for c in cells(nb) if c['cell_type'] == 'markdown']
              for nb in NBS}
    print('\nprose words per chapter:', ', '.join(f'{k} {sum(n for _, n in v)}' for k, v in counts.items()))
    over = {k: sum(n for _, n in v) for k, v in counts.items()
            if sum(n for _, n in v) > (GPU_BUDGET if k in GPU_CHAPTERS else BUDGET)}
    big = {k: [(i, n) for i, n in v if n > CELL_BUDGET] for k, v in counts.items()}
    assert not over, f'chapters over their prose budget: {over}'
    assert not any(big.values()), f'markdown cells over {CELL_BUDGET} words: {[(k, v) for k, v in big.items() if v]}'


# --- no name read before it exists ---------------------------------------------------------------------------------
_STAR = re.compile(r'^(\s*)from\s+([\w.]+)\s+import\s+\*\s*(#.*)?$', re.M)


def _star_names(modname: str) -> list:
    "The names `from modname import *` binds: its __all__, else every name without a leading underscore."
    mod = importlib.import_module(modname)
    names = getattr(mod, '__all__', None)
    return list(names) if names is not None else [n for n in vars(mod) if not n.startswith('_')]


def _as_python(code: str) -> str:
    "A code cell as Python: nbdev directives stay comments, magics are blanked, star imports spelled out."
    if code.lstrip().startswith('%%'): return ''
    code = '\n'.join('' if l.lstrip().startswith(('%', '!')) else l for l in code.splitlines())
    return _STAR.sub(lambda m: f"{m.group(1)}from {m.group(2)} import ({', '.join(_star_names(m.group(2))) or '_'})", code)


def undefined_names(nb: Path) -> list:
    "(cell id, line, name) for every name a code cell reads before an earlier cell or line defines it (pyflakes)."
    import pyflakes.checker, pyflakes.messages
    parts, where = [], []
    for c in cells(nb):
        if c['cell_type'] != 'code': continue
        code = _as_python(src(c)) + '\n'
        parts.append(code); where += [(c.get('id'), i + 1) for i in range(len(code.splitlines()))]
    checker = pyflakes.checker.Checker(ast.parse(''.join(parts)), str(nb), builtins=['display', 'get_ipython'])
    undefined = (pyflakes.messages.UndefinedName, pyflakes.messages.UndefinedLocal)
    return [(*where[m.lineno - 1], m.message_args[0]) for m in checker.messages if isinstance(m, undefined)]


def test_undefined_names_are_found(tmp_path):
    nb = tmp_path / 'probe.ipynb'
    code = lambda i, s: {'cell_type': 'code', 'id': i, 'source': s, 'metadata': {}, 'outputs': []}
    nb.write_text(json.dumps({'cells': [code('a', 'from fastcore.test import *\ntest_eq(1, 1)\nprint(y)'),
                                        code('b', '#| cuda\ny = 1\ndef f(): return zz')]}))
    assert undefined_names(nb) == [('a', 3, 'y'), ('b', 3, 'zz')]


@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_no_name_is_read_before_it_exists(nb):
    "Every code cell, `#| slow` and `#| cuda` ones included, runs top to bottom without a NameError."
    bad = undefined_names(nb)
    assert not bad, f'{nb.name}: names read before they exist (cell id, line, name): {bad}'
