# efficient_attention_nb — the usual targets. Every target sets up .venv first if it is missing.
# Times on a 2-core machine, from a fresh clone (longer while other jobs share the cores):
#   make main     set up, run every tutorial notebook (SLOW=1: slow cells too), quick benchmark plots, docs site
#                 (about 4.5 minutes with empty caches: set-up 30-50 s, tutorials ~3.3 min two at a time with the docs
#                 build beside them, then bench ~40 s alone)
#   make test     set up, run every test (all notebooks through nbdev's runner + package tests); CI runs this (~15 min)
#   make quick    set up, run the fast tests only (pytest -m 'not slow'): the development loop
#   make install  set up only: .venv with torch, the package (editable) and its dev extras, by uv (~30 s)
#   make docs     build the docs site into _docs/ (and README.md from nbs/index.ipynb) (~30 s)
#   make bench    `efficient-attention bench` into _bench/: every mechanism at n = 256, 1024, 2048 (~40 s)
#   make lab      JupyterLab on nbs/
#   make export / make clean-nbs   nbdev_export / nbdev_clean (run both before committing)
#   make gpu      on a GPU machine: run the notebooks' #| cuda cells and record their outputs in the notebooks
#                 (a GPU machine with torch but no nbdev: python nbs/_record_cuda.py --bare OUT.json NOTEBOOK there,
#                 then python nbs/_record_cuda.py --apply OUT.json here)
# GPU machines: make main TORCH_SPEC=torch   (pip's default torch wheel is the CUDA build)
# Long steps show a progress bar with the time left; JOBS=1 runs the tutorials one at a time.
SHELL := /bin/bash
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
JOBS ?= 2
VENV := .venv
BIN := $(VENV)/bin
PIPQ := $(BIN)/pip install --quiet --disable-pip-version-check
# torch 2.13's profiler otherwise prints 'USDT: profiler_start' lines into saved notebook outputs
export KINETO_LOG_LEVEL := 6

.PHONY: main test quick install docs lab export clean-nbs tutorials bench gpu clean

install: $(VENV)/.installed

# uv installs the same packages as pip, downloading, unpacking and byte-compiling in parallel: about 30 s from a
# fresh clone where pip took about 100. It does not read pip's configuration, so it is given the folders of wheels
# pip is told to look in (where a machine keeps a local torch build), from PIP_FIND_LINKS or pip's config.
FIND_LINKS ?= $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))

$(VENV)/.installed: settings.ini setup.py pyproject.toml
	@echo "== setting up $(VENV) ($(TORCH_SPEC))"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIPQ) uv 2> >(grep -v "is ignored: it is neither" >&2)
	@VIRTUAL_ENV="$(abspath $(VENV))" $(BIN)/uv pip install --quiet --compile-bytecode \
	  $(foreach f,$(FIND_LINKS),--find-links $(f)) "$(TORCH_SPEC)" -e ".[dev]"
	@touch $@

tutorials: install
	@echo "== running every tutorial notebook, $(JOBS) at a time (slow cells too with SLOW=1)"
	@$(BIN)/python nbs/_run_tutorials.py --out _executed --jobs $(JOBS) $(if $(SLOW),--flags slow,)

bench: install
	@echo "== quick benchmark of every mechanism against softmax attention (tables and plots in _bench/)"
	@$(BIN)/efficient-attention bench --out _bench --force

docs: install
	@echo "== building the docs site into _docs/ (nbdev's processing, Sphinx + myst-nb; MathJax from npm on first use)"
	@command -v npm >/dev/null || test -f nbs/_docs_deps/node_modules/mathjax/es5/tex-chtml.js \
	  || { echo "make docs needs npm (Node.js) once, to fetch MathJax"; exit 1; }
	@$(BIN)/python nbs/_build_docs.py --out _docs
	@echo "== docs site: $$(pwd)/_docs/index.html"

# The docs build reads nbs/, not the executed copies, so it runs beside the tutorials; the benchmark runs alone after
# both, so that nothing else competes with its timings.
main: install
	@$(MAKE) --no-print-directory -j2 tutorials docs
	@$(MAKE) --no-print-directory bench

test: install
	@$(BIN)/python -m pytest tests

quick: install
	@$(BIN)/python -m pytest tests -m 'not slow'

gpu: install
	@$(BIN)/python nbs/_record_cuda.py && $(BIN)/nbdev_clean

lab: install
	$(BIN)/jupyter lab nbs/

export: install
	$(BIN)/nbdev_export

clean-nbs: install
	$(BIN)/nbdev_clean

clean:
	rm -rf _executed _docs _proc _bench _train build dist *.egg-info
