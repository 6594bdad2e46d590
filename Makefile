# Two commands on a fresh machine: `make demo` and `make test`. Everything they need is
# installed here, into .venv, from the pinned constraints.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Java parts from Maven Central, one folder per pom of eos_assets/maven/ (never committed),
# fetched by `eos-assets jars` (again only when a pom changes): Apache Kafka and Delta, and
# the bench's peers (Spark Structured Streaming, Kafka Streams), each in a folder of its own:
# Spark's kafka-clients 3.9.2 never meets the broker's.
JARS := .jars
export DAGSTER_HOME ?= $(CURDIR)/.eos/dagster_home

.PHONY: docs install jars jars-s3 java maven demo test test-fast lint ui bench broker-up broker-down preflight spark-archive lock clean chromium postgres

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found: install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) jars

# Java 17 runs the broker and Spark; it is checked, not installed (pick your own JDK).
java:
	@command -v java >/dev/null || { echo "error: Java is missing: install a Java 17 runtime (Debian: apt-get install openjdk-17-jdk-headless) or put it on PATH"; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	  [ "$${v:-0}" -ge 17 ] || { echo "error: Java $$v found, 17 or newer needed: install openjdk-17-jdk-headless or set PATH"; exit 1; }

# Maven fetches the jars at install. Installed from Debian when missing and we are root.
maven:
	@command -v mvn >/dev/null || { \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: Maven is missing: run 'sudo apt-get update && sudo apt-get install -y maven'"; exit 1; \
	  fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }

# Once per install (and again when a pom changes): the jars of each pom and their runtime
# dependencies, copied into $(JARS)/<name>; the local schema registry's distribution (159 MB,
# Java 21+) unpacked into $(JARS)/registry/app.
jars: $(STAMP) | java maven
	@$(BIN)/eos-assets jars --dir $(JARS) --peers --registry

# A lake on S3, for the tests: Spark's s3a (hadoop-aws and the AWS SDK bundle, 659 MB: 45 s
# from an empty Maven cache on a loaded 2-core machine) and S3Proxy, the local S3 server of
# `eos-assets s3 up` and of the tests (11 s). `make demo` never fetches them.
jars-s3: $(STAMP) | java maven
	@$(BIN)/eos-assets jars --dir $(JARS) --peers --s3

preflight: $(STAMP) jars
	@$(BIN)/python -m eos_assets.preflight

# Once per install (about a minute): the classes the Spark driver loads, written to an archive
# that every later driver JVM maps instead of loading them, so each run starts a few seconds
# sooner. Nothing to do when the archive for this Java and these Spark jars exists. Without
# it everything works, only slower to start: a failure warns and goes on.
spark-archive: preflight
	@$(BIN)/eos-assets spark-archive >/dev/null || echo "warning: no Spark class archive (see above): each run's Spark driver starts a few seconds slower"

# `make demo` and `make ui` run Spark on the local Spark Connect server (`eos-assets spark up`,
# started here unless it runs already, and left running like the broker): every run connects
# to one warm Spark instead of starting a JVM of its own. EOS_SPARK_CONNECT set beforehand wins:
# empty for the in-process session, sc://host:port for a remote server.
demo ui: export EOS_SPARK_CONNECT ?= local
# The stream `make demo` runs: orders, or the example page_views (make demo STREAM=page_views).
# `make demo CONTINUOUS=60`: the stream's continuous loop for 60 s beside a paced producer.
STREAM ?= orders
CONTINUOUS ?=
SPARK_UP = if [ "$$EOS_SPARK_CONNECT" = local ]; then \
	  url=$$($(BIN)/eos-assets spark up) || exit 1; \
	  echo "Spark: the local Spark Connect server at $$url (stop it with 'eos-assets spark down')"; fi

demo: spark-archive
	@mkdir -p $(DAGSTER_HOME) && cp -n deploy/dagster.local.yaml $(DAGSTER_HOME)/dagster.yaml 2>/dev/null || true
	@$(SPARK_UP)
	$(BIN)/eos-assets demo --stream $(STREAM)$(if $(CONTINUOUS), --continuous $(CONTINUOUS))

# The UI test drives Debian's Chromium (headless). Installed only when missing.
chromium:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: /usr/bin/chromium is missing: run 'sudo apt-get update && sudo apt-get install -y chromium'"; exit 1; \
	  fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The production-instance test starts a PostgreSQL server of its own from Debian's binaries
# (/usr/lib/postgresql/<version>/bin). Installed only when missing.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: PostgreSQL is missing: run 'sudo apt-get update && sudo apt-get install -y postgresql'"; exit 1; \
	  fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

# Each test's setup, call and teardown seconds go to $(TEST_OUTPUT)/durations.tsv (slowest
# first, then each module's total); the 40 slowest are printed at the end as well.
# TEST_WORKERS processes run the tests (pytest-xdist; 0: one process): every test of the cluster
# and of the Spark server in one worker, one after another; the S3 server's tests in one worker;
# a module's tests in one (eos_assets_tests/conftest.py).
TEST_OUTPUT := .eos/test-output
# The sources are byte-compiled first: the suite starts a few hundred Python processes that
# import them, and with PYTHONDONTWRITEBYTECODE set none of them would write what it compiled.
TEST_WORKERS ?= 2
test: spark-archive jars-s3 chromium postgres
	$(BIN)/python -m compileall -q eos_assets eos_assets_tests
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=40 \
	  --durations-file=$(TEST_OUTPUT)/durations.tsv

# The fast tier: the pure units, no Kafka, Spark, Spark server, dagster dev or browser (tests
# marked `services` or `slow` are left out; `make test` runs everything).
test-fast: $(STAMP) jars
	$(BIN)/pytest -m "not services and not slow"

lint: $(STAMP)
	$(BIN)/ruff check eos_assets eos_assets_tests
	$(BIN)/ruff format --check eos_assets eos_assets_tests
	$(BIN)/pyright

ui: spark-archive
	@mkdir -p $(DAGSTER_HOME) && cp -n deploy/dagster.local.yaml $(DAGSTER_HOME)/dagster.yaml 2>/dev/null || true
	@$(BIN)/python -m eos_assets.preflight --port $${DAGSTER_PORT:-3000}
	@$(SPARK_UP)
	$(BIN)/dagster dev -w workspace.yaml -p $${DAGSTER_PORT:-3000}

# Speed against this machine's own ceiling, in one run (BENCHMARKS.md); results in bench-results/.
# `make bench BENCH_ARGS=--peers` adds the peers; any `eos-assets bench` option goes there.
bench: spark-archive
	$(BIN)/eos-assets bench $(BENCH_ARGS)

broker-up: $(STAMP) jars
	$(BIN)/eos-assets broker up

broker-down: $(STAMP)
	$(BIN)/eos-assets broker down

# Rewrite the README's column reference (between its two marker lines) from the code.
docs: $(STAMP)
	$(BIN)/python -m eos_assets.devkit.docs

# Re-resolve the pins after a change to pyproject.toml.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
	.lock-venv/bin/pip freeze --exclude-editable | grep -v '^-e' > constraints.txt
	rm -rf .lock-venv

clean:
	-$(BIN)/eos-assets registry down
	-$(BIN)/eos-assets spark down
	-$(BIN)/eos-assets broker down
	rm -rf .eos
