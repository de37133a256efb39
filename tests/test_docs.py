"Docs site (nbs/_build_docs.py): built into a temp folder, checked statically and in headless Chromium."
import json, re, shutil, subprocess, sys, tempfile
from html.parser import HTMLParser
from pathlib import Path
import pytest, yaml

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
CHROMIUM = '/usr/bin/chromium'

def _present(): return sorted(p.name for p in NBS.glob('*.ipynb') if not p.name.startswith(('_', '.')))
def _sidebar(): return yaml.safe_load((NBS/'sidebar.yml').read_text())['website']['sidebar']['contents']
def _page(nb): return re.sub(r'^\d+[a-zA-Z0-9]*_', '', nb.lower()).replace('.ipynb', '.html')  # nbdev's naming

def _nb_src(nb): return [''.join(c['source']) for c in json.loads((NBS/nb).read_text())['cells']]

def test_sidebar_lists_every_notebook():
    missing = [n for n in _present() if n not in _sidebar()]
    assert not missing, f'nbs/sidebar.yml lacks {missing}; run `python nbs/_build_docs.py --sidebar`'
    assert _sidebar()[0] == 'index.ipynb'

@pytest.fixture(scope='module')
def site():
    out = Path(tempfile.mkdtemp(prefix='docs_test_'))/'site'
    r = subprocess.run([sys.executable, str(NBS/'_build_docs.py'), '--out', str(out), '--no-readme'],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    yield out
    shutil.rmtree(out.parent, ignore_errors=True)

class _Page(HTMLParser):
    "Collects headings, links (sidebar separately), images and math elements of a page."
    def __init__(self, text):
        super().__init__(); self.h, self.links, self.side, self.imgs, self.math = [], [], [], [], 0
        self._in_side = self._in_h = False; self.title = ''
        self.feed(text)
    def handle_starttag(self, tag, a):
        a = dict(a)
        if tag == 'nav' and a.get('class') == 'sidebar': self._in_side = True
        if tag == 'a' and a.get('href'): (self.side if self._in_side else self.links).append(a['href'])
        if tag == 'img': self.imgs.append(a.get('src'))
        if tag == 'math': self.math += 1
        if tag in ('h1', 'h2', 'h3'): self._in_h = tag; self.h.append('')
    def handle_endtag(self, tag):
        if tag == 'nav': self._in_side = False
        if tag == self._in_h: self._in_h = False
    def handle_data(self, d):
        if self._in_h: self.h[-1] += d

def test_every_notebook_has_a_complete_page(site):
    nbs = [n for n in _sidebar() if n in _present()]
    assert (site/'index.html').exists() and (site/'styles.css').exists()
    for nb in nbs:
        f = site/_page(nb)
        assert f.exists(), f'no page for {nb}'
        p = _Page(f.read_text())
        src = _nb_src(nb)
        assert [s for s in p.h if s.strip()], f'{f.name}: no headings'
        # sidebar on every page, in sidebar.yml order, every link resolves
        assert p.side[1:len(nbs) + 1] == [_page(n) for n in nbs], f'{f.name}: sidebar {p.side}'
        for h in p.side + p.links:
            if re.match(r'^[a-z]+:', h) or h.startswith('#'): continue
            target = h.split('#')[0]
            planned = [n for n in _sidebar() if _page(n) == target and n not in _present()]
            assert (site/target).exists() or planned, f'{f.name}: broken link {h}'
        # API headings: one show_doc heading per documented name
        for s in src:
            for name in re.findall(r'^show_doc\((\w+(?:\.\w+)?)', s, re.M):
                assert name.split('.')[-1] in [x.strip().split('.')[-1] for x in p.h], f'{f.name}: no API heading {name}'
        # math: $...$ in markdown cells -> MathML
        if any('$' in s for s in src): assert p.math > 0, f'{f.name}: no <math> elements'
        # plots: every saved image output is a file in the site
        nb_imgs = sum('image/png' in o.get('data', {}) for c in json.loads((NBS/nb).read_text())['cells']
                      for o in c.get('outputs', []))
        assert len(p.imgs) >= (1 if nb_imgs else 0), f'{f.name}: {nb_imgs} plots in notebook, {len(p.imgs)} <img>'
        for i in p.imgs: assert (site/i).is_file(), f'{f.name}: missing image {i}'

def _shot(url, png):
    udd = tempfile.mkdtemp(prefix='chromium_')
    try:
        subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                        '--disable-background-networking', '--disable-component-update', '--disable-sync',
                        f'--user-data-dir={udd}', f'--screenshot={png}', '--window-size=1280,1600', url],
                       capture_output=True, timeout=120)
    finally: shutil.rmtree(udd, ignore_errors=True)
    assert png.exists(), f'no screenshot of {url}'

def _dom(url):
    udd = tempfile.mkdtemp(prefix='chromium_')
    try:
        r = subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                            '--disable-background-networking', '--disable-component-update', '--disable-sync',
                            f'--user-data-dir={udd}', '--dump-dom', url], capture_output=True, text=True, timeout=120)
    finally: shutil.rmtree(udd, ignore_errors=True)
    return r.stdout

@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f'{CHROMIUM} absent: `apt-get install -y chromium` to run the browser test')
def test_browser_renders_home_and_chapter(site):
    from PIL import Image
    shots = Path(tempfile.gettempdir())/'docs_screenshots'
    shots.mkdir(exist_ok=True)
    chapter = next(n for n in _sidebar() if n in _present() and n != 'index.ipynb')
    for nb in ['index.ipynb', chapter]:
        page = site/_page(nb)
        title = next(s for s in _nb_src(nb) if s.startswith('# ')).splitlines()[0][2:].strip()
        png = shots/page.with_suffix('.png').name
        png.unlink(missing_ok=True)
        _shot(page.as_uri(), png)
        im = Image.open(png).convert('L')
        assert im.size == (1280, 1600)
        lo, hi = im.getextrema()
        assert hi - lo > 100, f'{png}: blank screenshot'
        dark = sum(im.histogram()[:128]) / (im.size[0] * im.size[1])
        assert dark > 0.002, f'{png}: almost no text drawn ({dark:.4f})'
        dom = _dom(page.as_uri())
        h1 = re.search(r'<h1 class="title">(.*?)</h1>', dom, re.S)
        shown = ' '.join(re.sub(r'<[^>]+>', '', h1.group(1)).split()) if h1 else None   # HTML whitespace is insignificant
        assert shown == title.replace('`', ''), f'{page.name}: title {h1 and h1.group(1)}'
        assert '<math' in dom or not any('$' in s for s in _nb_src(nb))
