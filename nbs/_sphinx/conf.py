"""Sphinx configuration of the docs site (used by nbs/_build_docs.py; `nbdev_docs` uses nbs/_quarto.yml instead).

The source folder holds the notebooks after nbdev's processing (named like their pages: lama.ipynb -> lama.html)
and `_pages.json` (per page: the source notebook and a plain-text description).
"""
import configparser, json, os
from pathlib import Path

_ini = configparser.ConfigParser()
_ini.read(Path(__file__).resolve().parents[2]/'settings.ini')
cfg = _ini['DEFAULT']

project = cfg['title']
author = cfg['author']
copyright = cfg['copyright']
release = cfg['version']

extensions = ['myst_nb', 'sphinx_copybutton']       # sphinx-copybutton: a copy button on every code block
exclude_patterns = ['_build', '**.ipynb_checkpoints', '_notebooks']   # _notebooks: the source notebooks, to download
nb_execution_mode = 'off'                      # the saved outputs are the outputs: nothing runs at build time
nb_merge_streams = True
nb_render_markdown_format = 'myst'            # markdown outputs (tables a cell displays) as MyST: tables render
myst_enable_extensions = ['dollarmath', 'amsmath', 'attrs_inline', 'strikethrough']
copybutton_exclude = '.linenos, .gp, .go'     # the copied text is the code alone
myst_dmath_double_inline = True                # `$$...$$` inside a paragraph is display math, as in Quarto
suppress_warnings = ['myst.header', 'misc.highlighting_failure', 'myst.xref_missing']

html_theme = 'furo'
html_title = f"{cfg['title']} {release}"            # Furo shows it atop the sidebar: the version too
html_static_path = [os.path.join(os.environ.get('NBDOCS_SRC', '.'), '_static')]   # MathJax (npm) + CSS, by _build_docs.py
html_css_files = ['site.css']
mathjax_path = 'mathjax/tex-chtml.js'          # local file: no CDN, the site works offline
mathjax3_config = {'loader': {'load': ['[tex]/html']}, 'tex': {'packages': {'[+]': ['html']}}}
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    'source_repository': cfg['git_url'] + '/',
    'source_branch': cfg['branch'],
    'source_directory': cfg['nbs_path'] + '/',
    'top_of_page_buttons': ['view', 'edit'],
    'navigation_with_keys': True,
}

def _page_context(app, pagename, templatename, context, doctree):
    "Per page: <meta name=description> in plain text, and the 'view source' and 'edit' links to its notebook."
    pages = getattr(app, '_nb_pages', None)
    if pages is None: pages = app._nb_pages = json.loads((Path(app.srcdir)/'_pages.json').read_text())
    p = pages.get(pagename)
    if not p: return
    if p.get('description'):
        desc = p['description'].replace('&', '&amp;').replace('"', '&quot;').replace('<', '&lt;')
        context['metatags'] = context.get('metatags', '') + f'\n<meta name="description" content="{desc}">'
    context['theme_source_view_link'] = f"{cfg['git_url']}/blob/{cfg['branch']}/{cfg['nbs_path']}/{p['nb']}"
    context['theme_source_edit_link'] = f"{cfg['git_url']}/edit/{cfg['branch']}/{cfg['nbs_path']}/{p['nb']}"

def setup(app):
    app.connect('html-page-context', _page_context, priority=900)
