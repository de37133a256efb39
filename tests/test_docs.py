"""Docs site (nbs/_build_docs.py: nbdev's processing rendered by Sphinx + myst-nb + Furo, MathJax from local files)
and README.md links. The site is built once per session into a temp folder, checked statically, then in headless
Chromium: pages render, search finds the right page, math is typeset, next links walk the chapters."""
import functools, json, os, re, shutil, subprocess, sys, tempfile
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
import pytest, yaml

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
CHROMIUM = '/usr/bin/chromium'
need_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(),
    reason=f'{CHROMIUM} absent: `apt-get install -y chromium` (.ci/run does) to run the browser checks')

def _present(): return sorted(p.name for p in NBS.glob('*.ipynb') if not p.name.startswith(('_', '.')))
def _sidebar(): return yaml.safe_load((NBS/'sidebar.yml').read_text())['website']['sidebar']['contents']
def _order(): return [n for n in _sidebar() if n in _present()]
def _page(nb):   # nbdev's page naming: 01_lama.ipynb -> lama.html, index.ipynb -> index.html
    return re.sub(r'^\d+[a-zA-Z0-9]*_', '', nb.lower()).replace('.ipynb', '.html')
def _cells(nb): return json.loads((NBS/nb).read_text())['cells']
def _md(nb): return [''.join(c['source']) for c in _cells(nb) if c['cell_type'] == 'markdown']
def _code(nb): return [''.join(c['source']) for c in _cells(nb) if c['cell_type'] == 'code']
def _title(nb): return next(s for s in _md(nb) if s.startswith('# ')).splitlines()[0][2:].strip().replace('`', '')
def _has_math(nb): return any(re.search(r'\$[^$\s][^$]*\$', s) for s in _md(nb))
def _show_docs(nb): return [n for s in _code(nb) for n in re.findall(r'^show_doc\((\w+(?:\.\w+)?)', s, re.M)]

# ------------------------------------------------------------------------------------------ without a build
def test_sidebar_lists_every_notebook():
    missing = [n for n in _present() if n not in _sidebar()]
    assert not missing, f'nbs/sidebar.yml lacks {missing}; run `python nbs/_build_docs.py --sidebar`'
    assert _sidebar()[0] == 'index.ipynb'
    numbered = [n for n in _sidebar() if n[:2].isdigit()]
    assert numbered == sorted(numbered), 'chapters in sidebar.yml are out of order'

def _readme_links():
    md = (ROOT/'README.md').read_text()
    md = re.sub(r'```.*?```', '', md, flags=re.S)                     # code blocks hold no links
    return re.findall(r'\]\(([^)\s]+)\)', md) + re.findall(r'<img [^>]*src="([^"]+)"', md)

def test_readme_links_resolve_on_github():
    links = _readme_links()
    assert links, 'README.md has no links'
    for l in links:
        if re.match(r'^[a-z]+:', l) or l.startswith('#'): continue
        target = l.split('#')[0]
        assert not target.endswith('.html'), f'README links {l}: a page of the site, not a file GitHub shows'
        assert (ROOT/target).exists(), f'README links {l}: no such file in the repository'

def test_readme_chapter_links_reach_every_chapter():
    links = _readme_links()
    for nb in _present():
        if nb in ('index.ipynb',): continue
        page = _page(nb)
        assert any(l == f'nbs/{nb}' or re.search(rf'/{re.escape(page)}(#|$)', l) for l in links), \
            f'README does not link chapter {nb} (nbs/{nb} or the published {page})'

# ------------------------------------------------------------------------------------------ the built site
_build = {}

@pytest.fixture(scope='session')
def site(tmp_path_factory):
    """The site, built once per session (DOCS_SITE=folder checks a site already built by `make docs` instead).
    Built with --keep-going: a notebook whose doc cells fail still gets a page (test_nbdev_processing fails)."""
    if os.environ.get('DOCS_SITE'): return Path(os.environ['DOCS_SITE']).resolve()
    out = tmp_path_factory.mktemp('docs')/'site'
    r = subprocess.run([sys.executable, str(NBS/'_build_docs.py'), '--out', str(out), '--no-readme', '--keep-going'],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    _build['log'] = r.stdout + r.stderr
    return out

def test_nbdev_processing_runs_every_notebook(site):
    "nbdev's doc processing (imports, exports, show_doc) ran in every notebook, as `nbdev_docs` needs."
    failed = [l for l in _build.get('log', '').splitlines() if l.startswith('warning:') and 'Error' in l]
    assert not failed, 'imports belong in cells of their own (CONVENTIONS §5):\n' + '\n'.join(failed)

class _Page(HTMLParser):
    "Ids, links (sidebar tree separately), images, tables, math elements, meta description and the h1 of a page."
    def __init__(self, text):
        super().__init__()
        self.ids, self.links, self.side, self.imgs, self.scripts, self.styles = set(), [], [], [], [], []
        self.math = self.tables = 0
        self.h1, self.desc, self.next, self.prev = '', None, None, None
        self._side = 0; self._h1 = False
        self.feed(text)
    def handle_starttag(self, tag, a):
        a = dict(a); cls = (a.get('class') or '').split()
        if a.get('id'): self.ids.add(a['id'])
        if tag == 'div' and 'sidebar-tree' in cls: self._side = 1
        elif tag == 'div' and self._side: self._side += 1
        if tag == 'a' and a.get('href'):
            (self.side if self._side else self.links).append(a['href'])
            if 'next-page' in cls: self.next = a['href']
            if 'prev-page' in cls: self.prev = a['href']
        if tag == 'img': self.imgs.append(a.get('src'))
        if tag == 'script' and a.get('src'): self.scripts.append(a['src'])
        if tag == 'link' and a.get('rel') == 'stylesheet': self.styles.append(a.get('href'))
        if tag in ('div', 'span') and 'math' in cls: self.math += 1
        if tag == 'table': self.tables += 1
        if tag == 'meta' and a.get('name') == 'description': self.desc = a.get('content')
        if tag == 'h1' and not self.h1: self._h1 = True
    def handle_endtag(self, tag):
        if tag == 'div' and self._side: self._side -= 1
        if tag == 'h1': self._h1 = False
    def handle_data(self, d):
        if self._h1: self.h1 += d

@pytest.fixture(scope='session')
def pages(site): return {nb: _Page((site/_page(nb)).read_text()) for nb in _order()}

def test_every_notebook_has_a_page_with_its_title(site, pages):
    for nb, p in pages.items():
        shown = ' '.join(p.h1.replace('¶', '').split())
        assert shown == ' '.join(re.sub(r'\$([^$]*)\$', r'\1', _title(nb)).split()) or nb == 'index.ipynb', \
            f'{_page(nb)}: h1 {shown!r}, notebook title {_title(nb)!r}'

def test_sidebar_previous_next_follow_the_chapters(pages):
    order = [_page(n) for n in _order()]
    for i, (nb, p) in enumerate(pages.items()):
        chapters = [h.split('#')[0] for h in p.side if not re.match(r'^[a-z]+:', h)]
        chapters = [h if h not in ('#', '') else _page(nb) for h in chapters]
        assert chapters == order[1:] + ['genindex.html'], f'{_page(nb)}: sidebar {chapters}'   # then the API index
        assert p.next == (order[i + 1] if i + 1 < len(order) else None), f'{_page(nb)}: next link {p.next}'
        if i: assert p.prev == order[i - 1], f'{_page(nb)}: previous link {p.prev}'

def test_links_resolve_and_none_points_at_a_private_name(site, pages):
    ids = {_page(nb): p.ids for nb, p in pages.items()}
    for nb, p in pages.items():
        for h in p.links + p.side:
            if re.match(r'^[a-z]+:', h): continue
            target, _, frag = h.partition('#')
            target = target or _page(nb)
            assert (site/target).exists(), f'{_page(nb)}: broken link {h}'
            assert not frag.startswith('_'), f'{_page(nb)}: link to a private name {h}'
            if frag and target in ids: assert frag in ids[target], f'{_page(nb)}: link {h}: no such anchor'
        for i in p.imgs: assert i.startswith('data:') or (site/i).is_file(), f'{_page(nb)}: missing image {i}'

def test_offline_no_cdn_and_plain_meta_descriptions(site, pages):
    assert (site/'_static'/'mathjax'/'tex-chtml.js').is_file()
    for nb, p in pages.items():
        remote = [u for u in p.scripts + p.styles if re.match(r'^(https?:)?//', u or '')]
        assert not remote, f'{_page(nb)} loads {remote}: the site must work offline'
        assert p.desc, f'{_page(nb)}: no meta description'
        assert not re.search(r'[$\\]', p.desc), f'{_page(nb)}: LaTeX in the meta description: {p.desc}'
        if _has_math(nb): assert p.math, f'{_page(nb)}: notebook has $math$, page has no math elements'

def test_api_headings_and_argument_tables(site, pages):
    "Every show_doc'd name has the anchor nbdev's links use, and a table of its arguments when it takes any."
    n_tables = 0
    for nb, p in pages.items():
        html = (site/_page(nb)).read_text()
        for name in _show_docs(nb):
            anchor = name.lower()
            assert anchor in p.ids, f'{_page(nb)}: no anchor #{anchor} for show_doc({name})'
            start = html.index(f'id="{anchor}"')
            head_end = html.index('</h', start)
            nxt = re.search(r'<h\d|class="api-anchor"', html[head_end:])
            block = html[start: head_end + (nxt.start() if nxt else len(html))]
            pre = re.search(r'<pre>(.*?)</pre>', block, re.S)
            sig = re.sub(r'<[^>]+>', '', pre.group(1)) if pre else ''
            args = re.sub(r'\bself\b,?', '', sig[sig.find('(') + 1: sig.rfind(')')]).strip(' ,\n*/')
            if args:
                assert re.search(r'Details(</p>)?</th>', block), f'{_page(nb)}: show_doc({name}) has arguments but no argument table'
                n_tables += 1
    assert n_tables > 0

def _blocks(html, cls):
    "Text of the <pre> blocks inside the divs of class `cls` (cell_input: the code shown; cell_output: its outputs)."
    out = []
    for part in html.split(f'<div class="{cls} ')[1:]:
        part = part.split('<div class="cell ', 1)[0]
        out += [unescape(re.sub(r'<[^>]+>', '', m)) for m in re.findall(r'<pre[^>]*>(.*?)</pre>', part, re.S)]
    return out

def test_no_directive_lines_in_shown_code(site):
    "Quarto/nbdev cell options (`#| eval: false`, `#| slow`) are read by the builder, never shown as code."
    for nb in _order():
        for code in _blocks((site/_page(nb)).read_text(), 'cell_input'):
            bad = [l for l in code.splitlines() if re.match(r'\s*#\s*\|', l)]
            assert not bad, f'{_page(nb)}: directive line shown in code: {bad[0]!r}'

def test_markdown_tables_render_as_tables(site):
    "A markdown table a cell prints or displays becomes an HTML table: no `|---|` row in a paragraph or an output."
    sep = re.compile(r'^\s*\|(\s*:?[-—–]{1,}:?\s*\|)+\s*$', re.M)
    for nb in _order():
        html = (site/_page(nb)).read_text()
        paras = [unescape(re.sub(r'<[^>]+>', '', p)) for p in re.findall(r'<p>(.*?)</p>', html, re.S)]
        raw = [p for p in paras if re.search(r'\|\s*[-—–]{1,3}\s*\|', p)]
        assert not raw, f'{_page(nb)}: a markdown table rendered as a paragraph: {raw[0][:120]!r}'
        outs = [o for o in _blocks(html, 'cell_output') if sep.search(o)]
        assert not outs, f'{_page(nb)}: a printed markdown table left as text: {outs[0][:120]!r}'

def test_signatures_read_as_written(site):
    "No `ForwardRef('torch.Tensor')` (NamedTuple fields) in a signature; an exception class is shown as a class."
    for nb in _order():
        text = unescape(re.sub(r'<[^>]+>', '', (site/_page(nb)).read_text()))
        assert 'ForwardRef' not in text, f'{_page(nb)}: ForwardRef in a signature'
        bad = re.findall(r'def (\w+(?:Error|Interrupted))\(', text)
        assert not bad, f'{_page(nb)}: the exception class {bad[0]} shown as a function'

def _css_rules(css):
    css = re.sub(r'/\*.*?\*/', '', css, flags=re.S)
    return [(sel, body) for sel, body in re.findall(r'([^{}]+)\{([^{}]*)\}', css)]

def test_code_and_outputs_wrap_instead_of_scrolling(site):
    "The site's CSS wraps shown code and outputs at the column's edge (the browser test measures the result)."
    rules = _css_rules((site/'_static'/'site.css').read_text())
    for target in ('.highlight pre', 'div.cell_output pre'):
        assert any(target in [x.strip() for x in sel.split(',')] and re.search(r'white-space:\s*pre-wrap', body)
                   for sel, body in rules), f'site.css: no `white-space: pre-wrap` rule for {target}'

# ------------------------------------------------------------------------------------------ in Chromium
def _chromium(*args, url, timeout=90):
    udd = tempfile.mkdtemp(prefix='chromium_')
    try:
        return subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                               '--disable-background-networking', '--disable-component-update', '--disable-sync',
                               '--disable-dev-shm-usage', f'--user-data-dir={udd}', *args, url],
                              capture_output=True, text=True, timeout=timeout)
    finally: shutil.rmtree(udd, ignore_errors=True)

@functools.lru_cache(maxsize=None)
def _dom(url): return _chromium('--virtual-time-budget=15000', '--dump-dom', url=url).stdout   # once per page

@need_chromium
def test_browser_renders_home_and_chapter(site):
    from PIL import Image
    shots = Path(tempfile.gettempdir())/'docs_screenshots'
    shots.mkdir(exist_ok=True)
    for nb in ['index.ipynb', _order()[1]]:
        page = site/_page(nb)
        png = shots/page.with_suffix('.png').name
        png.unlink(missing_ok=True)
        _chromium('--virtual-time-budget=5000', f'--screenshot={png}', '--window-size=1280,1600', url=page.as_uri())
        assert png.exists(), f'no screenshot of {page}'
        im = Image.open(png).convert('L')
        assert im.size == (1280, 1600)
        lo, hi = im.getextrema()
        assert hi - lo > 100, f'{png}: blank screenshot'
        dark = sum(im.histogram()[:128]) / (im.size[0] * im.size[1])
        assert dark > 0.002, f'{png}: almost no text drawn ({dark:.4f})'

def _math_nb(): return next((n for n in _order() if '03_' in n), None) or next(n for n in _order()[1:] if _has_math(n))

@need_chromium
def test_browser_math_is_typeset(site, pages):
    "MathJax (local) replaced every TeX span of a chapter by rendered math, without errors; braces with labels too."
    nb = _math_nb()
    dom = _dom((site/_page(nb)).as_uri())
    n = dom.count('<mjx-container')
    assert n >= pages[nb].math > 0, f'{_page(nb)}: {n} typeset formulas for {pages[nb].math} math elements'
    assert '<mjx-merror' not in dom and 'data-mjx-error' not in dom, f'{_page(nb)}: MathJax reports a TeX error'
    text = re.sub(r'<(script|style)\b.*?</\1>', '', re.sub(r'<mjx-assistive-mml.*?</mjx-assistive-mml>', '', dom, flags=re.S), flags=re.S)
    text = re.sub(r'<[^>]+>', ' ', text)
    raw = re.findall(r'\\(?:frac|overbrace|underbrace|mathbb|sum)\b', text)
    assert not raw, f'{_page(nb)}: raw TeX left on the page: {raw[:5]}'
    if any('overbrace' in s for s in _md(nb)): assert 'mjx-munder' in dom or 'mjx-mover' in dom

@need_chromium
@pytest.mark.parametrize('term,nb', [('LAMAPooler', '01_lama.ipynb'), ('CompositionalAttention', '05_compositional.ipynb')])
def test_browser_search_finds_the_page(site, term, nb):
    if nb not in _present(): pytest.skip(f'{nb} not in nbs/')
    dom = _dom((site/'search.html').as_uri() + f'?q={term}')
    results = re.findall(r'<li[^>]*>\s*<a href="([^"#?]+)', dom.split('id="search-results"', 1)[-1])
    assert results, f'searching {term!r} found nothing'
    assert results[0] == _page(nb), f'searching {term!r}: first result {results[0]}, expected {_page(nb)} ({results[:5]})'

@need_chromium
def test_browser_next_link_walks_to_the_next_chapter(site):
    order = _order()
    i = order.index(_math_nb())                   # the page the math test loaded: one browser run for both
    dom = _dom((site/_page(order[i])).as_uri())
    nxt = re.search(r'<a class="next-page" href="([^"]+)"', dom)
    assert nxt and nxt.group(1) == _page(order[i + 1]), f'next link on {_page(order[i])}: {nxt and nxt.group(1)}'
    title = _title(order[i + 1])
    assert ' '.join(title.split()[:2]) in re.sub(r'<[^>]+>', ' ', dom.split('next-page', 1)[1][:600]).replace('\n', ' ')

_MEASURE = r"""<script>
function splitWords(sel) {   // words of these elements drawn over two lines: broken inside a name or a word
  const out = [];             // (a zero-width space marks a break the page allows; in prose, also after a hyphen)
  for (const el of document.querySelectorAll(sel)) {
    const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT); let n;
    while ((n = w.nextNode())) {
      const words = n.parentElement.closest('code') ? /[^\s\u200b]+/g : /[^\s\u200b-]+-*/g;
      for (const m of n.data.matchAll(words)) {
        const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
  }
  return out;
}
window.addEventListener('load', () => setTimeout(() => {
  const vw = document.documentElement.clientWidth, r = {vw, page: document.documentElement.scrollWidth, wide: []};
  const toc = document.querySelector('.toc-drawer');
  if (toc && getComputedStyle(toc).position !== 'fixed') r.toc = toc.getBoundingClientRect().right;
  for (const el of document.querySelectorAll('article pre, article .table-wrapper'))
    if (el.scrollWidth > el.clientWidth + 1)
      r.wide.push([el.scrollWidth, el.clientWidth, el.textContent.trim().slice(0, 80)]);
  r.split = {th: splitWords('article th'), toc: splitWords('.toc-tree a'), heading: splitWords('article :is(h1,h2,h3,h4,h5,h6)')};
  const tocBox = document.querySelector('.toc-scroll');   // an entry wider than the column: cut off or scrolled
  r.tocOver = [...document.querySelectorAll('.toc-tree a')].filter(a => tocBox && a.getBoundingClientRect().width > 0
    && a.getBoundingClientRect().right > tocBox.getBoundingClientRect().right + 1).map(a => a.textContent);
  r.imgs = [...document.querySelectorAll('article img')].filter(i => i.naturalWidth).map(i =>
    [i.getAttribute('src'), i.naturalWidth, i.getBoundingClientRect().width]);
  r.sigs = [...document.querySelectorAll('article :not(.cell_input) > div[class^=highlight-] pre')].map(p => {
    const cs = getComputedStyle(p), lh = parseFloat(cs.lineHeight);
    const h = p.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom);
    return [p.textContent.replace(/\n$/, '').split('\n').length, Math.round(h / lh), p.textContent.slice(0, 60)];
  });
  r.tables = [...document.querySelectorAll('article table')].map(t => {
    const box = t.closest('.table-wrapper') || t.parentElement, b = box.getBoundingClientRect();
    const args = [...t.querySelectorAll('th')].map(h => h.textContent.trim()).join('|') === '|Type|Default|Details';
    return [t.getBoundingClientRect().right, b.right, getComputedStyle(box).overflowX, t.textContent.trim().slice(0, 60), args];
  });
  const out = document.createElement('pre'); out.id = 'site-measure'; out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
  if (window.parent !== window) window.parent.postMessage(out.textContent, '*');   // framed: a phone-wide viewport
}, 300));
</script></body>"""

# Chromium's window is at least 500 px wide: a narrower viewport is an iframe of that width, which posts the measures
_FRAME = """<!doctype html><html><body style="margin:0"><iframe src="{src}" width="{width}" height="1600" style="border:0">
</iframe><script>addEventListener('message', e => {{ const out = document.createElement('pre');
out.id = 'site-measure'; out.textContent = e.data; document.body.appendChild(out); }});</script></body></html>"""

@functools.lru_cache(maxsize=None)
def _measure(site, page, width):
    """Measures of `page` at a `width` px window (once per page and width): the page's width, the contents column's
    right edge, blocks that scroll sideways, words broken over two lines, figures' natural and shown widths,
    signatures' lines, tables and their boxes."""
    tmp = site/f'_measure_{width}_{page}'           # next to the page: its relative CSS and scripts load
    tmp.write_text((site/page).read_text().replace('</body>', _MEASURE, 1))
    frame = site/f'_frame_{width}_{page}'
    frame.write_text(_FRAME.format(src=tmp.name, width=width))
    try:
        if width >= 500: dom = _chromium(f'--window-size={width},1600', '--virtual-time-budget=8000', '--dump-dom',
                                         url=tmp.as_uri()).stdout
        else: dom = _chromium('--window-size=800,1700', '--hide-scrollbars', '--virtual-time-budget=8000', '--dump-dom',
                              url=frame.as_uri()).stdout
    finally: tmp.unlink(); frame.unlink()
    m = re.search(r'<pre id="site-measure">(.*?)</pre>', dom, re.S)
    assert m, f'{page}: the measuring script did not run'
    return json.loads(unescape(m.group(1)))

def _measure_all(site, width, names=None):
    from concurrent.futures import ThreadPoolExecutor
    names = names or _order()
    with ThreadPoolExecutor(2) as ex: return dict(zip(names, ex.map(lambda n: _measure(site, _page(n), width), names)))

@need_chromium
@pytest.mark.parametrize('width', [1440, 1600])
def test_browser_nothing_wider_than_its_column(site, width):
    """At 1440 and 1600 px: no page scrolls sideways, the "On this page" column is whole, and no code block, output
    or table scrolls sideways inside the text column (code and outputs wrap; tables fit)."""
    names = _order() if width == 1440 else [n for n in _order() if n in ('index.ipynb', '10_robustness.ipynb')]
    rs = _measure_all(site, width, names)
    problems = []
    for nb, r in rs.items():
        if r['page'] > r['vw']: problems.append(f"{_page(nb)}: the page is {r['page']} px wide in a {r['vw']} px window")
        if r.get('toc', 0) > r['vw'] + 1: problems.append(f"{_page(nb)}: 'On this page' ends at {r['toc']:.0f} px > {r['vw']}")
        problems += [f'{_page(nb)}: a block {w} px wide scrolls in {c} px: {t!r}' for w, c, t in r['wide']]
    assert not problems, '\n'.join(problems)

# ------------------------------------------------------------------------------------------ round 3 (issue 43)
def _article(html):
    "The page's article (Furo's <article role=main>), without scripts and styles."
    a = html.split('<article', 1)[-1].split('</article>', 1)[0]
    return re.sub(r'<(script|style)\b.*?</\1>', '', a, flags=re.S)

def _text(html): return unescape(re.sub(r'<[^>]+>', '', html))

def _export_cells(nb):
    "Source of the notebook's `#| export` cells (imports-only cells excepted: the page leaves those out)."
    import ast
    out = []
    for s in _code(nb):
        if not re.search(r'^\s*#\|\s*export\s*$', s, re.M): continue
        code = '\n'.join(l for l in s.splitlines() if not re.match(r'\s*#\s*\|', l))
        try: body = ast.parse(code).body
        except SyntaxError: body = [None]
        if all(isinstance(t, (ast.Import, ast.ImportFrom)) for t in body): continue
        out.append(code)
    return out

def test_every_exported_cell_is_shown(site):
    "The code the chapters derive is on the page: every `#| export` cell (private helpers, Triton kernels) as code."
    missing = []
    for nb in _order():
        shown = '\n'.join(_blocks((site/_page(nb)).read_text(), 'cell_input'))
        for code in _export_cells(nb):
            first = next(l for l in code.splitlines() if l.strip())
            if first not in shown: missing.append(f'{_page(nb)}: {first.strip()[:90]!r}')
    assert not missing, f'{len(missing)} exported cells not shown:\n' + '\n'.join(missing[:40])

_SKIP = re.compile(r'\s+|<!--.*?-->|<span[^>]*></span>|</(li|ul|ol)>', re.S)   # blanks, comments, anchors, a list's end
_INTRODUCED = re.compile(r'<div class="(cell |cell_input|cell_output|highlight|math|table-wrapper)|<(ul|ol|table|img|figure)\b')

def _prose_before_prose(html):
    "Paragraphs that end with ':' and are followed by more prose (a paragraph, a heading, a section's end)."
    art, bad = _article(html), []
    art = re.sub(r'<div class="cell_output.*?(?=<div class="cell |</section>)', '', art, flags=re.S)   # outputs
    for m in re.finditer(r'<p>(.*?)</p>', art, re.S):
        if not _text(m.group(1)).rstrip().endswith(':'): continue
        i = m.end()
        while (s := _SKIP.match(art, i)) and s.end() > i: i = s.end()
        nxt = art[i:i + 60]
        if _INTRODUCED.match(nxt): continue
        bad.append(f'{_text(m.group(1)).strip()[-90:]!r} -> {nxt[:40]!r}')
    return bad

def test_a_colon_introduces_code_or_a_figure(site):
    """A paragraph that ends with ':' introduces what follows it: code, a figure, a formula, a list or a table,
    never more prose (the sign that the cell it introduces is missing from the page)."""
    bad = [f'{_page(nb)}: {b}' for nb in _order() for b in _prose_before_prose((site/_page(nb)).read_text())]
    assert not bad, f'{len(bad)} paragraphs end with ":" and are followed by prose:\n' + '\n'.join(bad)

def test_no_raw_latex_outside_math(site):
    "No `$` or `\\command` in the text of a page outside its math elements, code and outputs (a formula markdown broke)."
    bad = []
    for nb in _order():
        art = _article((site/_page(nb)).read_text())
        for pat in (r'<(span|div) class="math[^"]*"[^>]*>.*?</\1>', r'<pre\b.*?</pre>', r'<code\b.*?</code>'):
            art = re.sub(pat, ' ', art, flags=re.S)
        text = _text(art)
        bad += [f'{_page(nb)}: ...{text[max(0, m.start() - 60): m.end() + 30]!r}'.replace('\\n', ' ')
                for m in re.finditer(r'\$|\\[A-Za-z]+', text)]
    assert not bad, f'{len(bad)} raw TeX fragments:\n' + '\n'.join(bad[:20])

def test_api_headings_show_names_as_written(site):
    "An API heading reads as its name: `PeakMemoryServer.__call__`, not `PeakMemoryServer.**call**`."
    bad, n = [], 0
    for nb in _order():
        html = (site/_page(nb)).read_text()
        for m in re.finditer(r'<span class="api-anchor" id="([^"]+)"></span>.*?<h\d[^>]*>(.*?)</h\d>', html, re.S):
            n += 1
            shown = _text(m.group(2)).replace('¶', '').replace('\u200b', '').strip()
            if shown.lower() != m.group(1): bad.append(f'{_page(nb)}: #{m.group(1)} reads {shown!r}: {m.group(2)[:90]!r}')
    assert n and not bad, '\n'.join(bad)

def test_types_read_none_not_nonetype(site):
    bad = [_page(nb) for nb in _order() if 'NoneType' in _text(_article((site/_page(nb)).read_text()))]
    assert not bad, f'NoneType shown as a type on {bad}'

def test_reader_conveniences(site):
    """Copy buttons (sphinx-copybutton), the version atop the sidebar, a populated API index linked from the sidebar,
    and per chapter: its notebook to download (a copy on the site), on GitHub, and an "edit this page" link."""
    cfg = {k.strip(): v.strip() for k, v in re.findall(r'^(\w+)\s*=\s*(.*)$', (ROOT/'settings.ini').read_text(), re.M)}
    gi = (site/'genindex.html').read_text()
    entries = re.findall(r'<li><a href="([\w.-]+\.html)#[^"]+">', gi)
    names = {n for nb in _order() for n in _show_docs(nb)}
    assert len(entries) >= len(names) > 0, f'genindex.html lists {len(entries)} entries for {len(names)} API names'
    for nb in _order():
        html = (site/_page(nb)).read_text()
        assert 'copybutton.js' in html, f'{_page(nb)}: no copy button script'
        brand = re.search(r'class="sidebar-brand-text">(.*?)<', html, re.S)
        assert brand and cfg['version'] in brand.group(1), f'{_page(nb)}: no version in the sidebar brand'
        assert 'href="genindex.html"' in html, f'{_page(nb)}: the sidebar does not link the API index'
        dl = re.search(r'href="(_downloads/[^"]+/' + re.escape(nb) + ')"', html)
        assert dl and (site/unescape(dl.group(1))).is_file(), f'{_page(nb)}: no download link to {nb}'
        for kind, where in (('blob', _article(html)), ('edit', html)):   # on GitHub under the title; edit atop the page
            url = f"{cfg['git_url']}/{kind}/{cfg['branch']}/{cfg['nbs_path']}/{nb}"
            assert f'href="{url}"' in where, f'{_page(nb)}: no link {url}'

def _png_dpi(path):
    "The resolution matplotlib wrote into a PNG (pixels per inch of the figure), or None."
    from PIL import Image
    try: dpi = Image.open(path).info.get('dpi')
    except Exception: return None
    return dpi[0] if dpi else None

@need_chromium
def test_browser_figures_legible(site):
    """At 1440 px every figure is shown at >= 80 px per inch of the matplotlib figure (the resolution in its PNG), so
    8-point legend text is >= 8.9 px on screen: a figure wider than the column is not shrunk below that, it scrolls
    in its own box. A picture without a resolution is never shown below its natural size."""
    bad = []
    for nb, r in _measure_all(site, 1440).items():
        for src, natural, shown in r['imgs']:
            dpi = None if src.startswith('data:') else _png_dpi(site/src)
            if dpi and dpi * shown / natural < 79.5:
                bad.append(f'{_page(nb)}: {src} shown at {dpi * shown / natural:.0f} px per figure inch '
                           f'({shown:.0f} of {natural} px at {dpi:.0f} dpi: 8-pt text is {8 / 72 * dpi * shown / natural:.1f} px)')
            elif not dpi and shown < natural - 1: bad.append(f'{_page(nb)}: {src} shrunk to {shown / natural:.0%}')
    assert not bad, '\n'.join(bad)

@need_chromium
@pytest.mark.parametrize('width', [1440, 390])
def test_browser_identifiers_and_headers_whole(site, width):
    "Table headers, headings and table-of-contents entries break between words, never inside a word or a name."
    bad = []
    for nb, r in _measure_all(site, width).items():
        bad += [f'{_page(nb)}: {k} {w!r} broken over two lines' for k, ws in r['split'].items() for w in ws]
        bad += [f'{_page(nb)}: table-of-contents entry {t!r} cut off' for t in r['tocOver']]
    assert not bad, '\n'.join(bad)

@need_chromium
def test_browser_phone_layout(site):
    """At 390 px (a phone): no page scrolls sideways; an API signature (or other code block in the prose) is not
    wrapped (each continuation line keeps its indent: it scrolls in its own box); an argument table fits the screen
    (its Details column on screen), another table fits or scrolls in its own box."""
    bad = []
    for nb, r in _measure_all(site, 390).items():
        if r['page'] > r['vw']: bad.append(f"{_page(nb)}: the page is {r['page']} px wide in a {r['vw']} px window")
        bad += [f'{_page(nb)}: signature of {n} lines drawn on {m}: {t!r}' for n, m, t in r['sigs'] if m != n]
        bad += [f"{_page(nb)}: {'argument ' if args else ''}table ends at {tr:.0f} px, its box at {br:.0f} px: {t!r}"
                for tr, br, ov, t, args in r['tables']
                if (tr > br + 1 and (args or ov not in ('auto', 'scroll'))) or br > r['vw'] + 1]
    assert not bad, '\n'.join(bad[:30])

@need_chromium
def test_browser_search_results_have_excerpts(site):
    """Served over HTTP (as GitHub Pages serves it), search lists each page with an excerpt around the term (Sphinx
    fetches the page for it; a browser opening the files directly blocks that fetch, so there titles only)."""
    import http.server, threading
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try: dom = _chromium('--virtual-time-budget=15000', '--dump-dom',
                         url=f'http://127.0.0.1:{srv.server_address[1]}/search.html?q=LAMAPooler').stdout
    finally: srv.shutdown()
    res = dom.split('id="search-results"', 1)[-1]
    assert re.search(r'<p class="context">.*?LAMAPooler', res, re.S), 'search results have no excerpts'
