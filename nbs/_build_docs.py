"""Build the docs site offline: nbdev's own notebook processing, rendered by pandoc instead of Quarto.

`nbdev_docs` processes every notebook with `nbdev.processors.FilterDefaults` (directives honoured, hidden and export
cells removed, `show_doc` cells added and executed, names linked) into `_proc/`, then hands the result to Quarto.
Quarto cannot be installed on these machines, so this script runs the same processing and gives the processed
notebooks to pandoc (from PyPI `pypandoc-binary`): HTML5 with MathML (no network), highlighted code, saved plots
extracted as image files, a sidebar in `nbs/sidebar.yml` order, and README.md (GitHub markdown) from index.ipynb.
The only glue is what Quarto would otherwise do: apply the Quarto cell options nbdev leaves in the processed
notebooks (`echo`, `output`, `include`, `code-fold`) and point links at pages (`01_lama.ipynb` -> `lama.html`).

    python nbs/_build_docs.py [--out _docs] [--proc _proc] [--readme-only] [--no-readme] [--sidebar]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent   # the repo root: holds settings.ini
NBS = ROOT/'nbs'
SIDEBAR = NBS/'sidebar.yml'
os.chdir(ROOT)                                   # nbdev's get_config() looks for settings.ini from the cwd

import yaml, pypandoc
from fastcore.parallel import parallel
from execnb.nbio import read_nb, write_nb, mk_cell
from nbdev.config import get_config
from nbdev.doclinks import _nbpath2html     # nbdev's page naming: 01_lama.ipynb -> lama.html
from nbdev.process import extract_directives
from nbdev.processors import FilterDefaults
import nbdev.serve_drv

# pandoc markdown extensions Quarto relies on (link attributes in show_doc, ::: divs, {#id} headers, footnotes)
FROM = 'ipynb' + ''.join('+'+e for e in ['link_attributes', 'fenced_divs', 'bracketed_spans', 'header_attributes',
    'footnotes', 'fenced_code_attributes', 'inline_code_attributes', 'definition_lists', 'implicit_figures'])

LUA = r'''-- links: site-absolute -> relative (site), NN_x.ipynb -> page; drop code blocks emptied by `echo: false`
local cfg = pandoc.json.decode(os.getenv('NBDOCS_LINKS'))
function Link(l)
  local t = l.target
  if cfg.strip ~= '' and t:sub(1, #cfg.strip) == cfg.strip then t = t:sub(#cfg.strip + 1) end
  local f, frag = t:match('^%.?/?([^#?/]+%.ipynb)(.*)$')
  if f and cfg.pages[f] then t = cfg.base .. cfg.pages[f] .. frag end
  l.target = t
  return l
end
function CodeBlock(b) if b.text:match('^%s*$') then return {} end end
function Div(d) if cfg.unwrap then return d.content end end   -- README: no notebook-cell <div>s in GitHub markdown
'''

TEMPLATE = r'''<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nbdev + pandoc">
<title>$pagetitle$ – $site$</title>
$if(description-meta)$<meta name="description" content="$description-meta$">$endif$
<style>
$highlighting-css$
</style>
<link rel="stylesheet" href="styles.css">
</head>
<body>
<nav class="sidebar" aria-label="Chapters">
<a class="site-title" href="index.html">$site$</a>
$sidebar$
<p class="repo"><a href="$repo$">Source on GitHub</a></p>
</nav>
<main>
<header id="title-block-header">
<h1 class="title">$title$</h1>
$if(description)$<p class="description">$description$</p>$endif$
</header>
$if(toc)$<nav id="TOC" class="toc" aria-label="On this page"><h2>On this page</h2>
$table-of-contents$
</nav>$endif$
$body$
<footer><p>Generated from <code>nbs/$notebook$</code> by nbdev's notebook processing and pandoc.</p></footer>
</main>
</body>
</html>
'''

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

def process(names, proc):
    "nbdev's docs processing (what `nbdev_proc_nbs` runs per notebook) of `names` into folder `proc`."
    proc.mkdir(parents=True, exist_ok=True)
    jobs = [(NBS/n, proc/n, FilterDefaults) for n in names]
    parallel(nbdev.serve_drv.main, jobs, n_workers=min(len(jobs), os.cpu_count() or 1), method='spawn')

def _frontmatter(nb):
    "Pop the frontmatter raw cell nbdev's FrontmatterProc put first; return it as a dict."
    c = nb.cells[0]
    if c.cell_type == 'raw' and c.source.strip().startswith('---'):
        nb.cells.pop(0)
        return yaml.safe_load(c.source.strip().strip('-')) or {}
    return {}

def _split_at_headings(c):
    "A markdown cell as one cell per heading: pandoc's table of contents lists only headings that open a cell."
    parts, fence = [[]], False
    for line in c.source.splitlines(keepends=True):
        if line.lstrip().startswith('```'): fence = not fence
        if not fence and line.startswith('#') and parts[-1]: parts.append([])
        parts[-1].append(line)
    if len(parts) == 1: return [c]
    return [mk_cell(''.join(p).strip('\n'), 'markdown') for p in parts]

def _quarto_opts(nb):
    "Apply the Quarto cell options left in processed notebooks, as `quarto render` would; return the new cells."
    cells = []
    for c in nb.cells:
        c.pop('has_sd', None)
        if c.cell_type == 'markdown': cells += _split_at_headings(c); continue
        if c.cell_type != 'code': cells.append(c); continue
        d = extract_directives(c)    # removes the `#|` lines from the source; keys like 'echo:' -> ['false']
        opt = lambda k: (d.get(k+':') or [''])[0].strip('"\'').lower()
        for o in c.get('outputs', []):
            if o.get('execution_count', 0) is None: o['execution_count'] = 0   # pandoc wants an int here
            data = o.get('data', {})
            if any(k.startswith('image/') for k in data): data.pop('text/plain', None)  # the picture, not its repr
        if opt('include') == 'false': continue
        if opt('output') == 'false': c.outputs = []
        if opt('output') == 'asis':  # raw markdown output (show_doc): becomes part of the page
            md = [''.join(o['data'].get('text/markdown') or o['data'].get('text/plain', ''))
                  for o in c.outputs if 'data' in o]
            c.outputs = [o for o in c.outputs if 'data' not in o]
            if opt('echo') != 'false': cells.append(c)
            cells += [mk_cell(s, 'markdown') for s in md]
            continue
        if opt('echo') == 'false': c.source = ''
        fold = opt('code-fold')
        if fold in ('true', 'show') and c.source:
            summary = (d.get('code-summary:') or ['Code'])[0].strip('"\'')
            html = lambda s: mk_cell(s, 'raw', metadata={'format': 'text/html'})
            cells += [html(f'<details class="code-fold"{" open" if fold == "show" else ""}><summary>{summary}</summary>'),
                      c, html('</details>')]
            continue
        cells.append(c)
    return cells

def _pandoc(args, cwd, links):
    env = dict(os.environ, NBDOCS_LINKS=json.dumps(links))
    subprocess.run([pypandoc.get_pandoc_path(), *args], cwd=cwd, env=env, check=True)

def _sidebar_html(pages, current):
    "The chapter list, current page marked."
    active = ' class="active" aria-current="page"'
    items = [f'<li{active if p["html"] == current else ""}><a href="{p["html"]}">{p["label"]}</a></li>' for p in pages]
    return '<ul class="chapters">\n' + '\n'.join(items) + '\n</ul>'

def _html_escape(s): return s.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('"', '&quot;')

def build(out=None, proc=None, readme=True, site=True):
    "Process the notebooks, render the site into `out` and README.md from index.ipynb."
    t0, cfg = time.time(), get_config()
    site_url = f"{cfg.doc_host}{cfg.doc_baseurl}".rstrip('/') + '/'
    names = sidebar_order() if site else [n for n in [cfg.readme_nb] if (NBS/n).exists()]
    out = Path(out or cfg.doc_path).resolve()
    tmp = Path(tempfile.mkdtemp(prefix='nbdocs_'))
    proc = Path(proc).resolve() if proc else tmp/'proc'
    try:
        process(names, proc)
        t_proc = time.time() - t0
        nbs = {n: read_nb(proc/n) for n in names}
        fms = {n: _frontmatter(nb) for n, nb in nbs.items()}
        pages = [dict(nb=n, html=fms[n].get('output-file', Path(n).stem + '.html'),
                      label=_html_escape(fms[n].get('title', n).split(':')[0])) for n in names]
        pmap = {n: _nbpath2html(Path(n)).name for n in present_nbs()} | {p['nb']: p['html'] for p in pages}
        lua, tpl = tmp/'links.lua', tmp/'page.html'
        lua.write_text(LUA); tpl.write_text(TEMPLATE)
        for n, nb in nbs.items():
            nb.cells = _quarto_opts(nb)
            write_nb(nb, tmp/n)
        if site:
            if out.exists(): shutil.rmtree(out)
            out.mkdir(parents=True)
            shutil.copy(NBS/'styles.css', out/'styles.css')
            links = dict(strip=site_url, base='', pages=pmap)
            for p in pages:
                fm, html = fms[p['nb']], p['html']
                meta = tmp/(p['nb'] + '.json')
                meta.write_text(json.dumps({k: fm[k] for k in ('title', 'description') if k in fm} |
                                           {'pagetitle': fm.get('title', p['nb'])}))
                _pandoc(['-f', FROM, '-t', 'html5', '-s', '--template', str(tpl), '--mathml', '--toc', '--toc-depth=2',
                         '--syntax-highlighting=pygments', '--lua-filter', str(lua), '--metadata-file', str(meta),
                         f'--extract-media={Path(html).stem}_files', '-V', f'sidebar={_sidebar_html(pages, html)}',
                         '-V', f'site={_html_escape(cfg.title)}', '-V', f'repo={cfg.git_url}',
                         '-V', f'notebook={p["nb"]}', '-V', f'description-meta={_html_escape(fm.get("description", ""))}',
                         str(tmp/p['nb']), '-o', html], out, links)
        if readme and cfg.readme_nb in nbs:
            fm, nb = fms[cfg.readme_nb], nbs[cfg.readme_nb]
            head = f"# {fm.get('title', cfg.title)}\n" + (f"\n> {fm['description']}\n" if fm.get('description') else '')
            nb.cells.insert(0, mk_cell(head, 'markdown'))
            write_nb(nb, tmp/'README.ipynb')
            media = Path(cfg.readme_nb).stem + '_files'    # nbdev_readme also puts README images in <stem>_files/
            shutil.rmtree(ROOT/media, ignore_errors=True)
            _pandoc(['-f', FROM, '-t', 'gfm', '--wrap=none', '--lua-filter', str(lua), f'--extract-media={media}',
                     str(tmp/'README.ipynb'), '-o', 'README.md'], ROOT, dict(strip='', base=site_url, pages=pmap, unwrap=True))
        elif readme: print(f'note: no nbs/{cfg.readme_nb}, README.md left as it is')
    finally: shutil.rmtree(tmp, ignore_errors=True)
    dt = time.time() - t0
    if site:
        size = sum(f.stat().st_size for f in out.rglob('*') if f.is_file())
        print(f'built {len(pages)} pages into {out} in {dt:.1f}s (nbdev processing {t_proc:.1f}s), {size/1e6:.2f} MB')
    return out

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', help='output folder (default: doc_path of settings.ini, _docs)')
    ap.add_argument('--proc', help='keep the processed notebooks in this folder (e.g. _proc); default: a temp folder')
    ap.add_argument('--readme-only', action='store_true', help='only write README.md from index.ipynb')
    ap.add_argument('--no-readme', action='store_true', help='do not touch README.md')
    ap.add_argument('--sidebar', action='store_true', help='rewrite nbs/sidebar.yml from the notebooks present, then stop')
    a = ap.parse_args()
    if a.sidebar: write_sidebar()
    else: build(a.out, a.proc, readme=not a.no_readme, site=not a.readme_only)
