# workloadbuilder — developer entry points. The README's quick start uses `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
SCENARIO ?= examples/simulations/gang-demo.yaml

.PHONY: run setup controlplane helm deploy lint test test-fast bench bench-real bench-real-1k bench-real-large bench-real-constraints bench-real-stream bench-real-queueing chaos soak soak-sim soak-real clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,all,docs]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP) ## create .venv and install the project with its dev tools

run: $(STAMP) ## the main job: replay the demo scenario on the embedded simulator
	$(VENV)/bin/workloadbuilder simulate $(SCENARIO)

controlplane: ## build (or reuse) etcd + kube-apiserver/scheduler/controller-manager v1.37.2
	hack/build-controlplane.sh

helm: ## build (or reuse) helm v4 from the Go module proxy, for the chart's tests
	hack/build-helm.sh

deploy: ## render charts/workloadbuilder's default output into deploy/workloadbuilder.yaml
	hack/render-deploy.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: $(STAMP) controlplane helm lint ## everything CI runs: lint, unit, embedded and real control-plane tests
	WORKLOADBUILDER_BIN_DIR=$$(hack/build-controlplane.sh | tail -n 1) \
	  WORKLOADBUILDER_HELM=$$(hack/build-helm.sh | tail -n 1)/helm $(VENV)/bin/pytest -q -p no:cacheprovider

test-fast: $(STAMP) ## unit and embedded tests only (no real control plane)
	$(VENV)/bin/pytest -q -m "not controlplane and not controllermanager"

bench: $(STAMP)
	$(PY) benchmarks/bench_memory_cluster.py
	$(PY) benchmarks/bench_scheduler.py

BENCH_REAL_ARGS ?=
bench-real: $(STAMP) controlplane ## upstream kube-scheduler vs ours vs a ceiling client on a real API server (not part of test)
	WORKLOADBUILDER_BIN_DIR=$$(hack/build-controlplane.sh | tail -n 1) $(PY) benchmarks/bench_real.py $(BENCH_REAL_ARGS)

REAL = WORKLOADBUILDER_BIN_DIR=$$(hack/build-controlplane.sh | tail -n 1) $(PY) benchmarks/bench_real.py
bench-real-1k: $(STAMP) controlplane ## the same, 1,000 nodes / 5,000 pods, two runs
	$(REAL) --nodes 1000 --pods 5000 --repeat 2 $(BENCH_REAL_ARGS)
bench-real-constraints: $(STAMP) controlplane ## 1,000 / 5,000 with one worker per node and a zone spread per gang
	$(REAL) --nodes 1000 --pods 5000 --pod-constraints $(BENCH_REAL_ARGS)
bench-real-large: $(STAMP) controlplane ## the same, 5,000 nodes / 10,000 pods
	$(REAL) --nodes 5000 --pods 10000 --timeout 1200 $(BENCH_REAL_ARGS)
bench-real-stream: $(STAMP) controlplane ## steady stream: the highest gang arrival rate each scheduler keeps up with
	$(REAL) --mode stream --nodes 1000 $(BENCH_REAL_ARGS)
bench-real-queueing: $(STAMP) controlplane ## heavy queueing: 5,000 gangs that cannot fit, probes, capacity in steps
	$(REAL) --mode queueing --nodes 100 --timeout 1800 $(BENCH_REAL_ARGS)

CHAOS_REPORT_DIR ?= reports/chaos
chaos: $(STAMP) controlplane ## the chaos tests at full size (2,000 pods, 20 kills, ...; not part of test)
	WORKLOADBUILDER_BIN_DIR=$$(hack/build-controlplane.sh | tail -n 1) CHAOS_SCALE=full \
	  CHAOS_REPORT_DIR=$(CHAOS_REPORT_DIR) $(VENV)/bin/pytest -q -s -p no:cacheprovider -m chaos tests/chaos

SOAK_OUT ?= reports/soak
SOAK_MINUTES ?= 60
soak-sim: $(STAMP) ## a simulated day: >= 20,000 gang pods through the simulator; RSS and time per round
	$(PY) benchmarks/soak.py sim --out $(SOAK_OUT)

soak-real: $(STAMP) controlplane ## the scheduler on a real API server for SOAK_MINUTES (default 60)
	WORKLOADBUILDER_BIN_DIR=$$(hack/build-controlplane.sh | tail -n 1) \
	  $(PY) benchmarks/soak.py real --minutes $(SOAK_MINUTES) --out $(SOAK_OUT)

soak: soak-sim soak-real ## both soaks (not part of test); pictures in $(SOAK_OUT)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
