# The two commands of the README: `make chaos` and `make test`. Both set everything up first and are
# quick when nothing changed (venv, images and jars are cached).
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup provision chaos test lint smoke bench clean reliability spark-cluster matrix platforms docs screenshots

setup:
	@scripts/setup.sh

provision: setup
	@$(BIN)/chaos images ensure
	@$(BIN)/chaos jars ensure >/dev/null
	@$(BIN)/python -m chaos.service.examples ensure >/dev/null
	@$(BIN)/chaos clean

## Run every chaos scenario (`pytest -m chaos` at the root) and write reports/. The fault plans' seed (RN1's
## random mix) is fixed so that the gate runs the same plans run after run: `make chaos CHAOS_SEED=` draws a
## random one (printed in the header), `CHAOS_SEED=N` or `--chaos-seed N` in PYTEST_ARGS another.
CHAOS_SEED ?= 2086958710
CHAOS_PYTEST = CHAOS_SEED=$(CHAOS_SEED) $(BIN)/pytest -m chaos
chaos: provision
	$(CHAOS_PYTEST) $(PYTEST_ARGS)

## Lint, type-check and run the whole test suite — the unit tests first, in a process (and Spark JVM) of
## their own, then the real-cluster tests (their runs audited by the reference engine:
## tests/integration/conftest.py; the audit on a Spark standalone cluster, chaos audit and spark-submit,
## included) — plus one real scenario run whose incident report is checked (ISR2's
## vulnerable variant, audited by Spark, the session's engine); then every page of the
## session's real report tree in headless Chromium (skipped in the first run, which has no tree yet);
## then the official-image path through a local registry as a non-root user (tests/platforms, ≈ 1.5 min
## warm; also `make platforms`), then the faster half of the reliability suite (the rest — kill -9 x10,
## Ctrl-C, two sessions and the iptables cycles — in `make reliability`: docs/reference.md).
REPORT_CHECK := scenarios/test_isr2_lost_isr.py::test_isr2[vulnerable]
SPARK_CLUSTER := tests/integration/test_spark_standalone.py
RELIABILITY_CI := $(addprefix tests/reliability/,test_bad_input_matrix.py test_reaper_trust.py \
	test_full_disk.py test_sigterm.py)
test: provision lint
	$(BIN)/pytest tests/unit --durations=10 $(PYTEST_ARGS)
	$(BIN)/pytest tests "$(REPORT_CHECK)" --ignore=tests/unit --ignore=tests/platforms \
	  --durations=10 $(PYTEST_ARGS)
	CHAOS_BROWSER_TREE=reports $(BIN)/pytest -q -p no:cacheprovider tests/integration/test_report_browser.py -k real_tree
	$(BIN)/pytest -q -p no:cacheprovider tests/platforms
	$(BIN)/pytest -q -p no:cacheprovider -m reliability $(RELIABILITY_CI)

## docs/scenarios.md from the scenario modules' docstrings (scripts/scenarios_doc.py).
docs:
	python3 scripts/scenarios_doc.py

## The screenshots of docs/report.md, from a real run: L2's vulnerable variant (about a minute and a half),
## its page shot in headless Chromium by scripts/report_screenshots.py into docs/img/.
SHOTS_TREE := reports/screenshots-run
screenshots: provision
	rm -rf $(SHOTS_TREE)
	CHAOS_REPORT_DIR=$(abspath $(SHOTS_TREE)) $(CHAOS_PYTEST) -p no:cacheprovider "scenarios/test_l2_acks1_leader_crash.py::test_l2[vulnerable]"
	$(BIN)/python scripts/report_screenshots.py $(SHOTS_TREE) docs/img

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean: setup
	$(BIN)/chaos clean

## The harness's own reliability: kill -9, SIGTERM, Ctrl-C, two sessions, a full disk, the
## reaper's trust, bad input — real containers, real signals, minutes per test (docs/reference.md, "Reliability").
reliability: provision
	$(BIN)/pytest -m reliability tests/reliability $(PYTEST_ARGS)

## The official-image path on this machine (docs/platforms.md): a registry built from the Go module
## proxy on 127.0.0.1, the local images pushed under their official names, the smoke test and one scenario
## as a non-root user with CHAOS_IMAGES=official and no build tool callable; auto's fallback on a registry
## that never answers. Creates the user chaos-nonroot (docker group) when run as root.
platforms: provision
	$(BIN)/pytest tests/platforms $(PYTEST_ARGS)

## The audit on a Spark standalone cluster alone (master + worker from the PySpark distribution, directly and
## through a Spark Connect server, on loopback; also part of `make test`): docs/spark-cluster.md.
spark-cluster: provision
	$(BIN)/pytest $(SPARK_CLUSTER) $(PYTEST_ARGS)

## The catalog on every supported Kafka version, the group cases under the consumer protocol on Kafka 4, and
## the Java-client cases (D1, ISR2, MPI1, MD3, O6 on kafka-clients of 4.4.0) (≈ 27 min per version here): one
## report tree per column under reports-matrix/, then their table (docs/matrix.md). Every column draws its
## fault plans from the same seed (CHAOS_SEED, as `make chaos`). A column that failed is still tabled; the exit
## status says one did.
MATRIX_DIR := reports-matrix
MATRIX_VERSIONS := 3.9.2 4.0.2 4.1.1 4.4.0
MATRIX_CONSUMER_VERSIONS := 4.1.1 4.4.0
MATRIX_GROUP_CASES := scenarios/test_mpi1_max_poll.py scenarios/test_d3_crash_before_commit.py \
	scenarios/test_l6_commit_before_process.py scenarios/test_md3_fast_restart.py
MATRIX_JAVA_VERSIONS := 4.4.0
MATRIX_JAVA_CASES := scenarios/test_d1_ack_timeout_duplicates.py scenarios/test_isr2_lost_isr.py \
	scenarios/test_mpi1_max_poll.py scenarios/test_md3_fast_restart.py scenarios/test_o6_eos_crash.py
matrix: provision
	@status=0; columns=""; \
	for v in $(MATRIX_VERSIONS); do \
	  $(CHAOS_PYTEST) --kafka-version $$v --chaos-report-dir $(MATRIX_DIR)/kafka-$$v $(PYTEST_ARGS) || status=1; \
	  columns="$$columns kafka-$$v=$(MATRIX_DIR)/kafka-$$v"; \
	done; \
	for v in $(MATRIX_CONSUMER_VERSIONS); do \
	  $(CHAOS_PYTEST) $(MATRIX_GROUP_CASES) --kafka-version $$v --chaos-group-protocol consumer \
	    --chaos-report-dir $(MATRIX_DIR)/kafka-$$v-consumer $(PYTEST_ARGS) || status=1; \
	  columns="$$columns kafka-$$v-consumer=$(MATRIX_DIR)/kafka-$$v-consumer"; \
	done; \
	for v in $(MATRIX_JAVA_VERSIONS); do \
	  $(CHAOS_PYTEST) $(MATRIX_JAVA_CASES) --kafka-version $$v --chaos-client java \
	    --chaos-report-dir $(MATRIX_DIR)/kafka-$$v-java $(PYTEST_ARGS) || status=1; \
	  columns="$$columns kafka-$$v-java=$(MATRIX_DIR)/kafka-$$v-java"; \
	done; \
	$(BIN)/chaos matrix $$columns | tee $(MATRIX_DIR)/matrix.md; exit $$status

## Audit benchmark: Spark vs the pure-Python reference on synthetic runs (slow: see docs/audit.md).
bench: provision
	$(BIN)/python benchmarks/audit_bench.py --records 1000000 --records 3000000 --records 5000000 --records 10000000 --cores 1,2 --timeout 3600 --memory-limit-mb 19000
