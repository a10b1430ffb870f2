# One command runs the app, one runs the tests. Both build .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
REPLICAS ?= 2

.PHONY: run test bench fuzz soak replicas download-models clean

$(VENV)/.app-installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.dev-installed: $(VENV)/.app-installed requirements-dev.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## make run: start the explorer on http://localhost:$(PORT), for this machine only,
## with the Real model page's "local folder" option on (a public server leaves it off)
run: $(VENV)/.app-installed
	EXPLORER_MODEL_FOLDERS=1 $(BIN)/streamlit run streamlit_app.py --server.port $(PORT) \
		--server.address 127.0.0.1

## make test: the whole suite (the chart modules' unit tests in Node, backend, AppTest,
## Playwright in /usr/bin/chromium)
test: $(VENV)/.dev-installed
	node --test tests/js/*.test.mjs
	$(BIN)/python -m pytest

## make bench: speed figures, printed and written to benchmarks/results/; then the
## capacity (visitors served with an edit p95 <= 2 s) of one process, with visitors that
## do not draw and that draw, and of 2 replicas behind nginx (about 15 minutes)
bench: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.browser
	$(BIN)/python -m benchmarks.capacity --no-draw --profile --seconds 30
	$(BIN)/python -m benchmarks.capacity --seconds 30
	$(BIN)/python -m benchmarks.capacity --no-draw --replicas 2 --seconds 30

## make fuzz: ten times the fuzzing in make test (20,000 backend configs, 3,000 URLs); prints counts
fuzz: $(VENV)/.dev-installed
	$(BIN)/python -m tests.fuzzing --examples 20000 --urls 3000

## make soak: 8 visitors at once in Chromium for 3 minutes, each checking its own numbers
soak: $(VENV)/.dev-installed
	$(BIN)/python -m tests.soak --seconds 180 --contexts 8

## make replicas: $(REPLICAS) streamlit processes behind nginx on http://127.0.0.1:8080,
## sticky by cookie (deploy/explorer.conf); needs Debian's nginx
replicas: $(VENV)/.app-installed
	PYTHON=$(BIN)/python deploy/replicas.sh $(REPLICAS)

## make download-models: fetch GPT-2 small and DistilGPT-2 once (online) for offline use
download-models: $(VENV)/.app-installed
	$(BIN)/python -m explorer.models download gpt2 distilgpt2

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
