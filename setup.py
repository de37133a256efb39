"""Package metadata, read from settings.ini the nbdev way (without pkg_resources, which recent setuptools lacks)."""
import shlex
from configparser import ConfigParser

import setuptools

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

for key in 'version description keywords author author_email'.split():
    if key not in cfg: raise KeyError(f'settings.ini is missing the key {key!r}')

licenses = {'apache2': 'Apache-2.0'}                                  # SPDX expressions (PEP 639)
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
lic = licenses.get(cfg['license'].lower(), cfg['license'])
min_python = cfg['min_python']
py_versions = ['3.10', '3.11', '3.12', '3.13']
requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
hf_requirements = shlex.split(cfg.get('hf_requirements', ''))              # the extra [hf]: the Hugging Face classes
console_scripts = cfg.get('console_scripts', '').split()

setuptools.setup(
    name=cfg['lib_name'].replace('_', '-'),
    version=cfg['version'],
    license_expression=lic,
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + [f'Programming Language :: Python :: {v}' for v in py_versions[py_versions.index(min_python):]],
    url=cfg['git_url'],
    packages=[cfg['lib_name'], cfg['lib_name'] + '.data'],      # the library, and the corpus it ships as data
    include_package_data=True,
    package_data={cfg['lib_name'] + '.data': ['*.txt']},
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'hf': hf_requirements,
                    'peers': ['linformer', 'linear-attention-transformer', 'local-attention==1.4.4', 'product-key-memory==0.1.10']},
    python_requires='>=' + min_python,
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': console_scripts, 'nbdev': [f'{cfg["lib_path"]}={cfg["lib_path"]}._modidx:d']},
    description=cfg['description'],
    author=cfg['author'], author_email=cfg['author_email'], keywords=cfg['keywords'],
)
