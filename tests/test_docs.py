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
        assert chapters == order[1:], f'{_page(nb)}: sidebar {chapters}'
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
window.addEventListener('load', () => setTimeout(() => {
  const vw = document.documentElement.clientWidth, r = {vw, page: document.documentElement.scrollWidth, wide: []};
  const toc = document.querySelector('.toc-drawer');
  if (toc && getComputedStyle(toc).position !== 'fixed') r.toc = toc.getBoundingClientRect().right;
  for (const el of document.querySelectorAll('article pre, article .table-wrapper'))
    if (el.scrollWidth > el.clientWidth + 1) r.wide.push([el.scrollWidth, el.clientWidth, el.textContent.trim().slice(0, 80)]);
  const out = document.createElement('pre'); out.id = 'site-measure'; out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
}, 300));
</script></body>"""

def _measure(site, page, width):
    "Widths of `page` at a `width` px window: the page, the contents column's right edge, blocks that scroll sideways."
    tmp = site/f'_measure_{width}_{page}'           # next to the page: its relative CSS and scripts load
    tmp.write_text((site/page).read_text().replace('</body>', _MEASURE, 1))
    try: dom = _chromium(f'--window-size={width},1600', '--virtual-time-budget=8000', '--dump-dom', url=tmp.as_uri()).stdout
    finally: tmp.unlink()
    m = re.search(r'<pre id="site-measure">(.*?)</pre>', dom, re.S)
    assert m, f'{page}: the measuring script did not run'
    return json.loads(unescape(m.group(1)))

@need_chromium
@pytest.mark.parametrize('width', [1440, 1600])
def test_browser_nothing_wider_than_its_column(site, width):
    """At 1440 and 1600 px: no page scrolls sideways, the "On this page" column is whole, and no code block, output
    or table scrolls sideways inside the text column (code and outputs wrap; tables fit)."""
    from concurrent.futures import ThreadPoolExecutor
    names = _order() if width == 1440 else [n for n in _order() if n in ('index.ipynb', '10_robustness.ipynb')]
    with ThreadPoolExecutor(2) as ex: rs = dict(zip(names, ex.map(lambda n: _measure(site, _page(n), width), names)))
    problems = []
    for nb, r in rs.items():
        if r['page'] > r['vw']: problems.append(f"{_page(nb)}: the page is {r['page']} px wide in a {r['vw']} px window")
        if r.get('toc', 0) > r['vw'] + 1: problems.append(f"{_page(nb)}: 'On this page' ends at {r['toc']:.0f} px > {r['vw']}")
        problems += [f'{_page(nb)}: a block {w} px wide scrolls in {c} px: {t!r}' for w, c, t in r['wide']]
    assert not problems, '\n'.join(problems)
