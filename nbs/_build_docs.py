"""Build the docs site offline: nbdev's notebook processing, rendered by Sphinx (myst-nb, Furo theme), math by MathJax.

`nbdev_docs` runs nbdev's processors over every notebook (directives honoured, hidden and export cells removed,
`show_doc` cells executed, names linked) into `_proc/` and hands the result to Quarto. Quarto cannot be installed on
these machines (its PyPI package downloads the binary at install time), so this script runs the same processing and
hands the processed notebooks to a well-kept engine instead:

1. **nbdev processing**: `nbdev.processors.FilterDefaults` per notebook (what `nbdev_proc_nbs` does), in parallel
   from four cores, with two changes: `show_doc` renders each signature with an argument table built from the
   docments (nbdev's `renderer` hook; nbdev 2.4.14's default renders the docments as comments only), and
   `#| export` cells stay on the page as code (the helpers and Triton kernels the prose derives), a public name's API
   entry after its cell.
2. **Quarto's part**: the Quarto cell options nbdev leaves (`echo`, `output`, `include`, `code-fold`) are applied,
   `show_doc` output becomes page content with the heading ids nbdev's links use (`#lama.forward`) and an API index
   entry, links to the published site become relative, links to private names (no anchor on any page) become plain
   code, and math written over several lines is joined onto one (so markdown cannot read a line of it as a list).
3. **Rendering**: Sphinx with myst-nb (no execution: the saved outputs are shown) and the Furo theme: search,
   previous/next, sidebar, table of contents, API index, copy buttons (sphinx-copybutton), "view source" and "edit"
   links, each chapter's notebook to download. Math by MathJax 3 from `npm install mathjax@3` into an ignored
   folder (`nbs/_docs_deps/`); no script is loaded from a CDN, so the site works offline.

README.md (GitHub markdown) is written from index.ipynb by the same steps and pandoc (pypandoc-binary).

    python nbs/_build_docs.py [--out _docs] [--proc _proc] [--readme-only] [--no-readme] [--sidebar]
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent   # the repo root: holds settings.ini
NBS = ROOT/'nbs'
SIDEBAR = NBS/'sidebar.yml'
DEPS = NBS/'_docs_deps'                          # npm packages fetched at build time (git-ignored)
MATHJAX_VERSION = '3.2.2'
os.chdir(ROOT)                                   # nbdev's get_config() looks for settings.ini from the cwd
os.environ.setdefault('KINETO_LOG_LEVEL', '6')   # torch's profiler: no 'USDT: profiler_start' lines in show_doc runs

import yaml
from execnb.nbio import read_nb, write_nb, mk_cell
from nbdev.config import get_config
from nbdev.doclinks import _nbpath2html     # nbdev's page naming: 01_lama.ipynb -> lama.html
from nbdev.process import extract_directives

# ---------------------------------------------------------------------------------------------- notebook list
def _sidebar_nbs():
    "Notebook names listed in nbs/sidebar.yml, in order."
    return yaml.safe_load(SIDEBAR.read_text())['website']['sidebar']['contents']

def present_nbs():
    "Notebooks in nbs/ (nbdev's default skip rule: names starting with `_` or `.` are not pages)."
    return sorted(p.name for p in NBS.glob('*.ipynb') if not p.name.startswith(('_', '.')))

def sidebar_order():
    "Notebooks present in nbs/, in sidebar order; fails if one is missing from sidebar.yml."
    listed, present = _sidebar_nbs(), present_nbs()
    missing = [n for n in present if n not in listed]
    if missing: sys.exit(f'nbs/sidebar.yml lacks {missing}: run `python nbs/_build_docs.py --sidebar`')
    absent = [n for n in listed if n not in present]
    if absent: print(f'note: sidebar.yml lists notebooks not (yet) in nbs/, skipped: {absent}')
    return [n for n in listed if n in present]

def write_sidebar():
    "Rewrite nbs/sidebar.yml from the notebooks present: index first, then by name (nbdev_sidebar's order)."
    nbs = sorted(present_nbs(), key=lambda n: (n != 'index.ipynb', n))
    SIDEBAR.write_text(yaml.dump({'website': {'sidebar': {'contents': nbs}}}, sort_keys=False, indent=2))
    print(f'wrote {SIDEBAR} ({len(nbs)} notebooks)')

# ---------------------------------------------------------------------------------------------- 1. nbdev processing
def _anno(a):
    "An annotation as a reader writes it: `int`, `Callable | None`, `torch.Tensor` (a NamedTuple's string annotation too)."
    import inspect, typing
    if a is inspect.Parameter.empty: return ''
    if isinstance(a, typing.ForwardRef): a = a.__forward_arg__    # NamedTuple fields under `from __future__ import annotations`
    s = a if isinstance(a, str) else getattr(a, '__name__', None) if isinstance(a, type) else None
    s = s or inspect.formatannotation(a)
    s = re.sub(r'\b(?:typing|collections\.abc|efficient_attention_nb\.\w+)\.', '', s).replace(' | ', '|')
    return re.sub(r'\bNoneType\b', 'None', s)       # a default of None gives docments the type `NoneType`

def _default(d):
    "A default value as a reader writes it: `tanh`, not `<built-in method tanh of type object at 0x..>`."
    return getattr(d, '__name__', None) or repr(d)

def _cell(s): return str(s).replace('|', '\\|').replace('\n', ' ')
def _type_cell(a):
    "A type in the argument table: a narrow screen may break a union after its `|` (a zero-width space), not in a name."
    return _cell(_anno(a)).replace('\\|', '\\|\u200b')

def _library_twin(sym):
    """The package's own class for a class the notebook defined: docments read a class's source, and Python cannot
    find the source of a class defined in a notebook cell (a dataclass's generated `__init__` has none either)."""
    import importlib, inspect
    if not inspect.isclass(sym) or sym.__module__ != '__main__': return sym
    lib = get_config().lib_name
    for mod in sorted(Path(get_config().lib_path).glob('[!_]*.py')):
        twin = getattr(importlib.import_module(f'{lib}.{mod.stem}'), sym.__qualname__, None)
        if inspect.isclass(twin) and twin.__module__ == f'{lib}.{mod.stem}': return twin
    return sym

def _field_docments(cls):
    """A NamedTuple's fields as docments: `name: anno # comment` lines of its class body (fastcore's `docments` reads
    `__init__`'s source, and a NamedTuple's generated `__new__` has none)."""
    import inspect
    try: src = inspect.getsource(cls)
    except Exception: return {}
    notes = dict(re.findall(r'^\s+(\w+)\s*:[^#\n]*#\s*(.*?)\s*$', src, re.M))
    return {f: dict(docment=notes.get(f), anno=cls.__annotations__.get(f, inspect.Parameter.empty),
                    default=cls._field_defaults.get(f, inspect.Parameter.empty)) for f in cls._fields}

def arg_table(sym):
    "Markdown table of `sym`'s arguments from its docments (type, default, details), '' when none is documented."
    import inspect
    from fastcore.docments import docments
    sym = _library_twin(sym)
    if inspect.isclass(sym) and issubclass(sym, tuple) and hasattr(sym, '_fields'): dm = _field_docments(sym)
    else:
        try: dm = docments(sym, full=True, args_kwargs=True)
        except Exception: return ''
    dm.pop('self', None)
    ret = dm.pop('return', None) or {}
    if not any(v.get('docment') for v in dm.values()): return ''
    def default(v):
        d = v.get('default', inspect.Parameter.empty)
        return '' if d is inspect.Parameter.empty else _default(d)
    rows = ['| | Type | Default | Details |', '|---|---|---|---|']
    kinds = {}
    try: kinds = {n: p.kind for n, p in inspect.signature(sym).parameters.items()}
    except Exception: pass
    star = lambda k: ('**' if kinds.get(k) == inspect.Parameter.VAR_KEYWORD else
                      '*' if kinds.get(k) == inspect.Parameter.VAR_POSITIONAL else '') + k
    rows += [f"| `{star(k)}` | {_type_cell(v.get('anno', inspect.Parameter.empty))} | {_cell(default(v))} "
             f"| {_cell(v.get('docment') or '')} |" for k, v in dm.items()]
    if ret.get('docment') or (ret.get('anno', inspect.Parameter.empty) not in (inspect.Parameter.empty, None)):
        rows.append(f"| **Returns** | {_type_cell(ret.get('anno', inspect.Parameter.empty))} | "
                    f"| {_cell(ret.get('docment') or '')} |")
    return '\n'.join(rows)

def signature_md(sym, name, width=100):
    "`def name(a:int, *, b=1)->T:` (or `class name(...):`) wrapped at `width`: kw-only and positional-only marks kept."
    import inspect
    try: sig = inspect.signature(sym)          # annotations as written (no eval: `torch.Tensor|None`, not `Optional[..]`)
    except Exception:                          # a class without a signature of its own (an exception): its bases
        if not inspect.isclass(sym): return None
        return f"class {name}({', '.join(b.__qualname__ for b in sym.__bases__ if b is not object)}):"
    def _show_param(p):
        pre = '*' if p.kind == p.VAR_POSITIONAL else '**' if p.kind == p.VAR_KEYWORD else ''
        a = '' if p.annotation is p.empty else ':' + _anno(p.annotation)
        d = '' if p.default is p.empty else '=' + _default(p.default)
        return pre + p.name + a + d
    parts, star, pos_only = [], False, False
    for i, p in enumerate(sig.parameters.values()):
        if i == 0 and p.name == 'self': continue
        if p.kind == p.POSITIONAL_ONLY: pos_only = True
        elif pos_only: parts.append('/'); pos_only = False
        if p.kind == p.VAR_POSITIONAL: star = True
        if p.kind == p.KEYWORD_ONLY and not star: parts.append('*'); star = True
        parts.append(_show_param(p))
    if pos_only: parts.append('/')
    is_cls = inspect.isclass(sym)
    ret = '' if is_cls or sig.return_annotation is sig.empty else '->' + _anno(sig.return_annotation)
    lines, cur = [], ''
    for x in parts:
        if cur and len(cur) + len(x) + 2 > width - 4: lines.append(cur + ','); cur = ''
        cur = f'{cur}, {x}' if cur else x
    if cur: lines.append(cur)
    head = f"{'class' if is_cls else 'def'} {name}("
    if not lines: return head + f'){ret}:'
    if len(head) + len(lines[0]) + len(ret) + 2 <= width and len(lines) == 1: return f'{head}{lines[0]}){ret}:'
    return head + '\n' + '\n'.join('    ' + l for l in lines) + f'\n){ret}:'

def _source_link(sym, url):
    "nbdev's [source] URL, with the line number taken from the object where nbdev's index has none."
    import inspect
    if url and url.endswith('#LNone'):
        try: url = url[:-len('None')] + str(inspect.getsourcelines(inspect.unwrap(sym))[1])
        except Exception: url = url[:-len('#LNone')]
    return url

def _docs(text):
    "The docstring shown: the summary in italics, the rest dedented; its `Args:` list dropped (the table has it)."
    import textwrap
    text = re.split(r'\n\s*Args:\s*\n', text or '')[0].strip()
    if not text: return ''
    first, _, rest = text.partition('\n')
    rest = textwrap.dedent(rest).strip()
    return f'*{first.strip()}*' + (f'\n\n{rest}' if rest else '')

def _renderer():
    "nbdev's show_doc renderer: heading, [source] link, signature, docstring, and an argument table from the docments."
    from nbdev.showdoc import BasicMarkdownRenderer, _ext_link, NbdevLookup

    class ArgTableRenderer(BasicMarkdownRenderer):
        def __init__(self, sym, name=None, **kw):
            super().__init__(sym, name=name, **kw)
            if name is None and '.' in getattr(sym, '__qualname__', '') and '.' not in self.nm:   # @patch over
                self.nm, self.fn = sym.__qualname__, f'{sym.__module__}.{sym.__qualname__}'
            # another decorator (`@torch.no_grad()`): the wrapper has the `Class.method` name, the function does not

        def _repr_markdown_(self):
            md = f"{'#' * self.title_level} {self.nm}\n\n"
            src = _source_link(self.sym, NbdevLookup().code(self.fn))
            if src: md += _ext_link(src, 'source', 'class="source-link"') + '\n\n'
            sig = signature_md(self.sym, self.nm.split('.')[-1]) if callable(self.sym) else None
            md += f'```python\n{sig or self.dm}\n```\n\n'
            docs = _docs(getattr(self.sym, '__doc__', None) if sig else self.docs)
            if docs: md += docs + '\n\n'
            tbl = arg_table(self.sym)
            if tbl: md += tbl + '\n'
            return md
    return ArgTableRenderer

def _only_imports(src):
    "True when a cell's code is imports only (an `#| export` cell of imports: the page does not show it)."
    import ast
    try: tree = ast.parse(_strip_directives(src))
    except SyntaxError: return False
    return all(isinstance(t, (ast.Import, ast.ImportFrom)) for t in tree.body)

def _rm_hidden(cell):
    """nbdev's `rm_export`, except that `#| export` cells stay on the page: the code the prose derives (private
    helpers, Triton kernels) is shown where it stands, and a public name still gets its API entry after it
    (nbdev's `add_show_docs`). Hidden cells, `default_exp` and export cells of imports only are removed."""
    d = cell.directives_ or {}
    if d.keys() & {'hide', 'default_exp'}: del cell['source']
    elif d.keys() & {'export', 'exporti'}:
        if _only_imports(cell.source): del cell['source']
        else: cell.metadata['tags'] = ['exported']

def _filter(run_show_docs=True):
    """nbdev's processors (`FilterDefaults`) with `rm_export` replaced by `_rm_hidden`; without `run_show_docs`
    show_doc cells keep the outputs saved in the notebook."""
    from nbdev.processors import FilterDefaults, exec_show_docs, rm_export
    f = FilterDefaults()
    f.base_procs = lambda: [_rm_hidden if p is rm_export else p for p in FilterDefaults.base_procs(f)
                            if run_show_docs or p is not exec_show_docs]
    return f

def _process_one(job):
    "Worker: nbdev's docs processing of one notebook (show_doc with argument tables); returns an error or None."
    src, dst, fallback = job
    import nbdev.showdoc
    nbdev.showdoc.BasicMarkdownRenderer = _renderer()   # show_doc's default renderer (looked up at call time)
    main = sys.modules['__main__']      # IPython (nbdev's CaptureShell) replaces it; the next job needs it back
    nb = read_nb(src)
    flags = set(get_config().get('tst_flags', '').split())
    for c in nb.cells:      # nbdev runs every cell holding an import; never the slow/cuda ones (minutes, or no GPU)
        if c.cell_type == 'code' and flags & set(re.findall(r'^\s*#\|\s*(\w+)\s*$', c.source, re.M)):
            c.source = '#| eval: false\n' + c.source
    os.environ['IN_TEST'] = '1'         # as nbdev.serve_drv does
    try:
        _filter(run_show_docs=not fallback)(nb)
        write_nb(nb, dst)
    except Exception as e:
        cause = f'{type(e.__cause__).__name__}: {e.__cause__}' if e.__cause__ else ''
        return f'{Path(src).name}: {str(e).splitlines()[0]} {cause}'
    finally: sys.modules['__main__'] = main

def process(names, proc, keep_going=False):
    """nbdev's docs processing (what `nbdev_proc_nbs` runs per notebook) of `names` into folder `proc`.
    A notebook whose doc cells fail stops the build (as `nbdev_docs` does); with `keep_going` it is processed
    again without running them (its saved show_doc outputs are used) and the build goes on."""
    import contextlib, multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from types import SimpleNamespace
    proc.mkdir(parents=True, exist_ok=True)
    jobs = [(str(NBS/n), str(proc/n), False) for n in names]
    # each spawned worker imports torch and the library again: on two cores one process is faster (12 s against 23)
    workers = min(len(jobs), (os.cpu_count() or 1) // 2)
    with (ProcessPoolExecutor(workers, mp_context=mp.get_context('spawn')) if workers > 1
          else contextlib.nullcontext(SimpleNamespace(map=map))) as ex:
        errs = [e for e in ex.map(_process_one, jobs) if e]
        if errs and not keep_going:
            sys.exit('nbdev doc processing failed (imports belong in cells of their own, see CONVENTIONS §5):\n  '
                     + '\n  '.join(errs))
        for e in errs: print(f'warning: {e}\n  -> processed without running its show_doc cells', file=sys.stderr)
        again = [(str(NBS/n), str(proc/n), True) for n in names if any(e.startswith(n + ':') for e in errs)]
        errs = [e for e in ex.map(_process_one, again) if e]
        if errs: sys.exit('nbdev doc processing failed:\n  ' + '\n  '.join(errs))

# ---------------------------------------------------------------------------------------------- 2. Quarto's part
def _frontmatter(nb):
    "Pop the frontmatter raw cell nbdev's FrontmatterProc put first; return it as a dict."
    c = nb.cells[0]
    if c.cell_type == 'raw' and c.source.strip().startswith('---'):
        nb.cells.pop(0)
        return yaml.safe_load(c.source.strip().strip('-')) or {}
    return {}

_TEX = {r'\top': 'ᵀ', r'\times': '×', r'\cdot': '·', r'\le': '≤', r'\ge': '≥', r'\in': '∈', r'\sum': 'Σ',
        r'\phi': 'φ', r'\varphi': 'φ', r'\sigma': 'σ', r'\to': '→', r'\ll': '≪', r'\approx': '≈', r'\log': 'log',
        r'\mathbb{R}': 'ℝ', r'\infty': '∞', r'\Delta': 'Δ', r'\beta': 'β', r'\alpha': 'α', r'\ldots': '…'}
def plain_text(s):
    "Text with its `$...$` math written in plain characters (for meta descriptions, titles, the sidebar)."
    def _math(m):
        t = m.group(1)
        for k in sorted(_TEX, key=len, reverse=True): t = re.sub(re.escape(k) + r'(?![a-zA-Z])', _TEX[k], t)
        t = re.sub(r'\\(?:mathrm|text|mathbf|operatorname|mathcal)\{([^}]*)\}', r'\1', t)
        t = re.sub(r'\^\{([^}]*)\}', r'^\1', t)
        t = re.sub(r'\\[a-zA-Z]+', '', t).replace('{', '').replace('}', '').replace('\\', '')
        return ' '.join(t.split()).replace('^ᵀ', 'ᵀ')
    return re.sub(r'\$\$?([^$]+)\$\$?', _math, s).replace('`', '')

def _split_at_headings(c):
    "A markdown cell as one cell per heading (each heading opens a cell, as in Quarto's output)."
    parts, fence = [[]], False
    for line in c.source.splitlines(keepends=True):
        if line.lstrip().startswith('```'): fence = not fence
        if not fence and line.startswith('#') and parts[-1]: parts.append([])
        parts[-1].append(line)
    if len(parts) == 1: return [c]
    return [mk_cell(''.join(p).strip('\n'), 'markdown') for p in parts]

_DIRECTIVE = re.compile(r'^\s*#\s*\|.*$')
def _strip_directives(src):
    "Source without its leading `#|` lines: Quarto reads and drops them; the page shows code only."
    lines = src.splitlines(keepends=True)
    while lines and _DIRECTIVE.match(lines[0]): lines.pop(0)
    return ''.join(lines)

_TABLE_SEP = re.compile(r'^\|(\s*:?-{3,}:?\s*\|)+\s*$')
def _table_runs(text):
    "A printed text as [(is_table, lines)] runs: a markdown pipe table (header, `|---|` row, rows) or other text."
    lines, runs, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
        if lines[i].startswith('|') and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith('|'): j += 1
            runs.append((True, lines[i:j])); i = j
        else:
            if not runs or runs[-1][0]: runs.append((False, []))
            runs[-1][1].append(lines[i]); i += 1
    return runs

def _breakable_headers(md):
    "A markdown table's header cells may break after `_` (a zero-width space): `mem_fwdbwd_mb` at its words, no deeper."
    out = []
    for is_table, lines in _table_runs(md):
        if is_table: lines = [lines[0].replace('_', '_\u200b')] + lines[1:]
        out += lines
    return ''.join(out)

def _stream_tables(c):
    "Markdown tables a cell printed are shown as tables: the printed text around them stays preformatted."
    outs = []
    for o in c.get('outputs', []):
        runs = _table_runs(''.join(o.get('text', ''))) if o.get('output_type') == 'stream' else []
        if not any(t for t, _ in runs): outs.append(o); continue
        for is_table, lines in runs:
            if is_table: outs.append(dict(output_type='display_data', metadata={},
                                          data={'text/markdown': _breakable_headers(''.join(lines))}))
            else: outs.append(dict(o, text=''.join(lines)))
    c['outputs'] = outs

def _quarto_opts(nb):
    "Apply the Quarto cell options left in processed notebooks, as `quarto render` would; return the new cells."
    cells, shown = [], set()
    for c in nb.cells:
        c.pop('has_sd', None)
        if c.cell_type == 'markdown': cells += _split_at_headings(c); continue
        if c.cell_type != 'code': cells.append(c); continue
        d = extract_directives(c)    # removes nbdev's `#|` lines from the source; keys like 'echo:' -> ['false']
        c.source = _strip_directives(c.source)   # ... and Quarto's (`#| eval: false`), which it leaves for Quarto
        _stream_tables(c)
        opt = lambda k: (d.get(k+':') or [''])[0].strip('"\'').lower()
        for o in c.get('outputs', []):
            if o.get('execution_count', 0) is None: o['execution_count'] = 0   # pandoc (README) wants an int here
            data = o.get('data', {})
            if any(k.startswith('image/') for k in data): data.pop('text/plain', None)  # the picture, not its repr
            if opt('output') != 'asis' and 'text/markdown' in data:
                data['text/markdown'] = _breakable_headers(''.join(data['text/markdown']))
        if opt('include') == 'false': continue
        if opt('output') == 'false': c.outputs = []
        if opt('output') == 'asis':  # raw markdown output (show_doc): becomes part of the page
            md = [''.join(o['data'].get('text/markdown') or o['data'].get('text/plain', ''))
                  for o in c.outputs if 'data' in o]
            c.outputs = [o for o in c.outputs if 'data' not in o]
            if opt('echo') != 'false' or c.outputs: cells.append(c)
            heads = [m.group(2) for s in md for m in [_HEAD.search(s)] if m]
            if heads and heads[0] in shown: continue     # nbdev added a second show_doc for a decorated @patch method
            if heads and re.match(r'_[A-Za-z]', heads[0]): continue   # a method nbdev documents on a private class
            shown.update(heads)
            for s in md: cells += _split_at_headings(mk_cell(s, 'markdown'))
            continue
        if opt('echo') == 'false': c.metadata['tags'] = ['remove-input']   # myst-nb: show the outputs only
        if opt('code-fold') in ('true', 'show'): c.metadata['tags'] = ['hide-input']
        cells.append(c)
    return cells

def _links(md, site_url, pages):
    """Links to pages (`NN_x.ipynb`, `x.html`) -> the site's absolute URL, as nbdev writes its own doc links (made
    relative in the built HTML); links to private names (no anchor on any page, e.g. `_tileviews`) -> plain code."""
    def page(m):
        f, frag = m.group(1), m.group(2) or ''
        return f'](' + site_url + pages.get(f, f) + frag + ')'
    md = re.sub(r'\[\[([^\[\]]+)\]\([^)\s]+\)\]\(', r'[\1](', md)   # nbdev linked the text of a link: keep the outer one
    md = re.sub(r'\]\(\.?/?([\w.-]+\.(?:ipynb|html))(#[^)\s]*)?\)', page, md)
    return re.sub(r'\[(`?_\w[\w.]*`?)\]\([^)\s]*#_[^)\s]*\)', r'\1', md)

_IN_PARA = r'(?:(?!\n[ \t]*\n).)'        # any character, a blank line (the paragraph's end) excepted
_MATH_OR_CODE = re.compile(rf'(`+){_IN_PARA}+?\1'                                        # a code span: left as it is
                           rf'|\$\${_IN_PARA}+?\$\$'                                    # display math
                           rf'|(?<![\\$])\$(?=[^\s$]){_IN_PARA}*?(?<=[^\s\\])\$(?!\d)', re.S)   # inline, as dollarmath
def _keep_math(md):
    """Math written over several lines kept on one: markdown reads each line's start first, so a line inside a formula
    that begins `+ `, `- ` or `1. ` becomes a list item, and the TeX around it text (`\,` -> `,`). Code fences and code
    spans are left alone; a formula with a TeX comment (`%`) keeps its lines."""
    out, fence = [], None
    for part in re.split(r'(^[ \t]*(?:```|~~~).*$)', md, flags=re.M):
        if re.match(r'^[ \t]*(```|~~~)', part):
            tick = part.strip()[:3]
            fence = None if fence == tick else (fence or tick)
            out.append(part); continue
        if fence: out.append(part); continue
        out.append(_MATH_OR_CODE.sub(lambda m: m.group(0) if m.group(1) or re.search(r'(?<!\\)%', m.group(0))
                                     else re.sub(r'[ \t]*\n[ \t]*', ' ', m.group(0)), part))
    return ''.join(out)

_HEAD = re.compile(r'^(#{1,6}) (\S.*?)\s*$', re.M)
def _show_doc_ids(md):
    "Give show_doc headings the ids nbdev's links (and Quarto) use: `### LAMA.forward` -> `#lama.forward`."
    if not re.match(r'#{1,6} [\w.]+\s*\n\n(\[source\]|```python\n)', md): return md   # not a show_doc block
    def anchor(m):
        name = m.group(2)
        if not re.fullmatch(r'[\w.]+', name): return m.group(0)
        shown = name.replace('_', r'\_')          # `__call__` as written, not bold "call"
        if len(name) > 24: shown = shown.replace('.', '.\u200b')   # a phone may break a long `Class.method` after its
        # dot (a zero-width space: the names themselves stay whole; short ones, copied from the heading, have none)
        entry = f'```{{index}} single: {name}\n```\n\n'   # the API index (genindex.html) lists it
        return (f'<span class="api-anchor" id="{name.lower()}"></span>\n\n{entry}{m.group(1)} {shown}'
                + m.group(0)[m.end(2) - m.start():])
    return _HEAD.sub(anchor, md, count=1)

def _own_api_ids(html):
    """The API anchors own their ids: a section Sphinx gave the same id (a prose heading named like a class) is
    renamed `<id>-section`, and the page's own `#<id>` links (table of contents) follow it."""
    for a in set(re.findall(r'<span class="api-anchor" id="([^"]+)"></span>', html)):
        other = re.compile(r'(<(?!span class="api-anchor")[a-z]+\b[^>]*?) id="' + re.escape(a) + '"')
        if other.search(html):
            html = other.sub(r'\1 id="' + a + '-section"', html)
            html = html.replace(f'href="#{a}"', f'href="#{a}-section"')
    return html

def finish(nb, fm, site_url, pages, name):
    "A processed notebook as the page the engine renders: title cell, Quarto options applied, links made local."
    title, desc = fm.get('title', Path(name).stem), fm.get('description', '')
    cells = _quarto_opts(nb)
    for c in cells:
        if c.cell_type != 'markdown': continue
        c.source = _keep_math(_links(c.source, site_url, pages))
        c.source = _show_doc_ids(c.source)
    head = f'# {title}\n' + (f'\n> {desc}\n' if desc else '')
    nb.cells = [mk_cell(head, 'markdown')] + cells
    nb.metadata['efficient_attention_nb'] = dict(description=plain_text(desc), title=plain_text(title))
    return nb

# ---------------------------------------------------------------------------------------------- 3. rendering
def mathjax():
    "MathJax 3's es5 folder, from npm into nbs/_docs_deps (git-ignored) on first use: the site loads it locally."
    es5 = DEPS/'node_modules'/'mathjax'/'es5'
    if not (es5/'tex-chtml.js').exists():
        DEPS.mkdir(exist_ok=True)
        (DEPS/'.gitignore').write_text('*\n')          # fetched, never committed
        (DEPS/'package.json').write_text('{"private": true}\n')
        subprocess.run(['npm', 'install', '--no-audit', '--no-fund', '--silent', f'mathjax@{MATHJAX_VERSION}'],
                       cwd=DEPS, check=True)
    return es5

def _copy_mathjax(dst):
    "The parts of MathJax the pages load: tex-chtml.js, its fonts, TeX extensions (autoloaded), menu and a11y."
    es5 = mathjax()
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(es5/'tex-chtml.js', dst)
    for d in ['output', 'input', 'ui', 'a11y', 'adaptors']:
        if (es5/d).exists(): shutil.copytree(es5/d, dst/d, dirs_exist_ok=True)

def _toctree(pages):
    "The sidebar: the chapters, then the API index (Sphinx's genindex page, listed like a chapter)."
    return '```{toctree}\n:hidden:\n:maxdepth: 1\n\n' + '\n'.join(Path(p).stem for p in pages) + '\nAPI index <genindex>\n```'

def _notebook_links(nb):
    "A line under the title: the chapter's notebook to download (Sphinx's download role: a copy on the site) or open on GitHub."
    cfg, name = get_config(), nb.metadata['efficient_attention_nb']['nb']
    url = f'{cfg.git_url}/blob/{cfg.branch}/{Path(cfg.nbs_path).relative_to(cfg.config_path).as_posix()}/{name}'
    return mk_cell(f'{{download}}`Download the notebook <_notebooks/{name}>` · [open it on GitHub]({url})', 'markdown')

def render_sphinx(nbs, order, out, site_url):
    "Render finished notebooks {page.ipynb: nb} with Sphinx + myst-nb into `out`; `order` = pages in sidebar order."
    src = Path(tempfile.mkdtemp(prefix='nbdocs_src_'))
    try:
        home = order[0]
        nbs[home].cells.append(mk_cell(_toctree(order[1:]), 'markdown'))
        (src/'_notebooks').mkdir()
        for page, nb in nbs.items():
            shutil.copy(NBS/nb.metadata['efficient_attention_nb']['nb'], src/'_notebooks')
            nb.cells.insert(1, _notebook_links(nb))
            write_nb(nb, src/page)
        (src/'_pages.json').write_text(json.dumps({Path(p).stem: nb.metadata['efficient_attention_nb']
                                                   for p, nb in nbs.items()}))
        static = src/'_static'
        _copy_mathjax(static/'mathjax')
        shutil.copy(NBS/'styles.css', static/'site.css')
        if out.exists(): shutil.rmtree(out)
        cmd = [sys.executable, '-m', 'sphinx', '-b', 'html', '-q', '-j', 'auto', '-c', str(NBS/'_sphinx'), '-d', str(src/'.doctrees'),
               str(src), str(out)]
        t = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, NBDOCS_SRC=str(src)))
        print(f'sphinx: {time.time() - t:.1f}s')
        if r.returncode: sys.exit(f'sphinx failed:\n{r.stdout}\n{r.stderr}')
        warn = [l for l in r.stderr.splitlines() if 'WARNING' in l or 'ERROR' in l]
        if warn: print('\n'.join(['sphinx warnings:'] + warn[:20]))
    finally: shutil.rmtree(src, ignore_errors=True)
    for f in out.glob('*.html'):   # links to the published site -> relative (nbdev writes its doc links absolute)
        f.write_text(_own_api_ids(f.read_text().replace(f'href="{site_url}', 'href="')))
    for junk in ['.buildinfo', 'objects.inv', '.doctrees']:
        p = out/junk
        if p.is_dir(): shutil.rmtree(p)
        elif p.exists(): p.unlink()
    (out/'.nojekyll').touch()      # GitHub Pages: serve _static/ and _images/ as they are

# ---------------------------------------------------------------------------------------------- README.md
README_LUA = r'''-- GitHub markdown: drop emptied code blocks and notebook-cell <div>s
function CodeBlock(b) if b.text:match('^%s*$') then return {} end end
function Div(d) return d.content end
'''

def readme_links(md, site_url, nb_of_page):
    "README: a chapter link without anchor -> the notebook (GitHub renders it); with an anchor -> the published site."
    def f(m):
        page, frag = m.group(1), m.group(2) or ''
        if not frag and page in nb_of_page: return f'](nbs/{nb_of_page[page]})'
        return f']({site_url}{page}{frag})'
    return re.sub(r'\]\(' + re.escape(site_url) + r'([\w.-]+\.html)(#[^)\s]*)?\)', f, md)

def write_readme(nb, fm, site_url, nb_of_page):
    "README.md (GitHub markdown, pandoc) from the finished home page notebook; its images go to index_files/."
    import pypandoc
    cfg = get_config()
    for c in nb.cells:
        if c.cell_type == 'markdown': c.source = readme_links(c.source, site_url, nb_of_page)
        if c.cell_type == 'code' and 'remove-input' in c.metadata.get('tags', []): c.source = ''
        if c.cell_type == 'markdown' and c.source.startswith('```{toctree}'): c.source = ''
    tmp = Path(tempfile.mkdtemp(prefix='nbreadme_'))
    try:
        write_nb(nb, tmp/'README.ipynb')
        (tmp/'readme.lua').write_text(README_LUA)
        media = Path(cfg.readme_nb).stem + '_files'     # nbdev_readme also puts README images in <stem>_files/
        shutil.rmtree(ROOT/media, ignore_errors=True)
        subprocess.run([pypandoc.get_pandoc_path(), '-f', 'ipynb', '-t', 'gfm', '--wrap=none', '--lua-filter',
                        str(tmp/'readme.lua'), f'--extract-media={media}', str(tmp/'README.ipynb'), '-o', 'README.md'],
                       cwd=ROOT, check=True)
    finally: shutil.rmtree(tmp, ignore_errors=True)

# ---------------------------------------------------------------------------------------------- build
def build(out=None, proc=None, readme=True, site=True, reuse=False, keep_going=False):
    "Process the notebooks, render the site into `out` and README.md from index.ipynb."
    t0, cfg = time.time(), get_config()
    site_url = f"{cfg.doc_host}{cfg.doc_baseurl}".rstrip('/') + '/'
    names = sidebar_order() if site else [n for n in [cfg.readme_nb] if (NBS/n).exists()]
    out = Path(out or cfg.doc_path).resolve()
    tmp = Path(tempfile.mkdtemp(prefix='nbdocs_'))
    proc = Path(proc).resolve() if proc else tmp/'proc'
    try:
        if not (reuse and all((proc/n).exists() for n in names)): process(names, proc, keep_going)
        t_proc = time.time() - t0
        nbs = {n: read_nb(proc/n) for n in names}
        fms = {n: _frontmatter(nb) for n, nb in nbs.items()}
        page_of = {n: _nbpath2html(Path(n)).name for n in present_nbs()}
        page_of |= {n: fms[n].get('output-file', page_of.get(n, Path(n).stem + '.html')) for n in names}
        page_of[cfg.readme_nb] = 'index.html'
        done = {n: finish(nb, fms[n], site_url, page_of, n) for n, nb in nbs.items()}
        for n, nb in done.items(): nb.metadata['efficient_attention_nb']['nb'] = n
        if readme and cfg.readme_nb in done:
            import copy
            write_readme(copy.deepcopy(done[cfg.readme_nb]), fms[cfg.readme_nb], site_url,
                         {p: n for n, p in page_of.items()})
        elif readme: print(f'note: no nbs/{cfg.readme_nb}, README.md left as it is')
        if site:
            order = [Path(page_of[n]).with_suffix('.ipynb').name for n in names]
            render_sphinx({Path(page_of[n]).with_suffix('.ipynb').name: nb for n, nb in done.items()}, order, out,
                          site_url)
    finally: shutil.rmtree(tmp, ignore_errors=True)
    dt = time.time() - t0
    if site:
        size = sum(f.stat().st_size for f in out.rglob('*') if f.is_file())
        print(f'built {len(names)} pages into {out} in {dt:.1f}s (nbdev processing {t_proc:.1f}s), {size/1e6:.2f} MB')
    return out

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', help='output folder (default: doc_path of settings.ini, _docs)')
    ap.add_argument('--proc', help='keep the processed notebooks in this folder (e.g. _proc); default: a temp folder')
    ap.add_argument('--readme-only', action='store_true', help='only write README.md from index.ipynb')
    ap.add_argument('--no-readme', action='store_true', help='do not touch README.md')
    ap.add_argument('--reuse-proc', action='store_true', help='with --proc: keep notebooks already processed there')
    ap.add_argument('--keep-going', action='store_true',
                    help="a notebook whose show_doc cells fail is rendered with its saved show_doc outputs")
    ap.add_argument('--sidebar', action='store_true', help='rewrite nbs/sidebar.yml from the notebooks present, then stop')
    a = ap.parse_args()
    if a.sidebar: write_sidebar()
    else: build(a.out, a.proc, readme=not a.no_readme, site=not a.readme_only, reuse=a.reuse_proc, keep_going=a.keep_going)
