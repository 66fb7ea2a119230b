# Two entry points for everyone: `make run` and `make test`.
# Both create .venv on first use and install the project with its dev extras.

# The interpreter .venv is made with: the system's python3 when it is 3.11 or newer and
# can make a venv, else python3 from PATH; `make PYTHON=...` picks another. Debian's and
# Ubuntu's CPython are built with profile-guided and link-time optimisation, which a
# build from source (pyenv's, for one) leaves out unless asked: on theirs, pure Python
# runs about 20 % faster and a broker's send costs about 10 % fewer instructions
# (docs/operations.md, "The interpreter"). An existing .venv is kept as it is.
SYSTEM_PYTHON := /usr/bin/python3
PYTHON ?= $(shell $(SYSTEM_PYTHON) -c 'import ensurepip, sys; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo $(SYSTEM_PYTHON) || echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck layers unit clean java bytecode

# Modules compiled by Cython: those whose first line is a `# cython:` directive (setup.py).
CYTHON_SOURCES := $(shell find src/apogee -name '*.py' -exec awk 'FNR == 1 && /^\# cython:/ { print FILENAME }' {} +)

# Their C-level declarations, for cimport between them.
CYTHON_DECLARATIONS := $(shell find src/apogee -name '*.pxd')

# Editing a compiled source or declaration, setup.py or the C of GroupSync reinstalls,
# which rebuilds them.
$(STAMP): pyproject.toml setup.py $(wildcard src/apogee/*.c) $(CYTHON_SOURCES) $(CYTHON_DECLARATIONS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,spark-pipelines,dashboard]'
	touch $(STAMP)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Spark (the apogee[spark] extra) needs Java 17 or newer. Checked on every run, installed
# only when `java` is missing or older (Debian/Ubuntu: apt-get, as root or through sudo).
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1); \
	if [ -n "$$v" ] && [ "$$v" -ge 17 ]; then exit 0; fi; \
	echo "Java 17+ is needed for Spark (found: $${v:-none}); installing openjdk-17-jre-headless"; \
	$(SUDO) apt-get update -q && \
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q openjdk-17-jre-headless

# pip byte-compiles what it installs, but not this editable checkout. Where
# PYTHONDONTWRITEBYTECODE is set (as in many containers and CI runners), every process
# would then compile the package from its source as it starts: about 0.4 s of CPU for a
# broker, and again for every CLI call and Spark worker. Compiled here once (and again
# only what changed since); Python only reads these files. Spark's Python workers import
# PySpark from its pyspark.zip, which PyPI ships without byte-code: each worker compiled
# PySpark again, about 1.2 s of CPU here, so the archive gets byte-code too
# (apogee.spark.worker_archive; left alone once it has this interpreter's).
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q src/apogee
	$(BIN)/python -m apogee.spark.worker_archive

# `make run CONF=my.conf ARGS="--store /data/store --listen 0.0.0.0:10911"`
CONF ?= conf/broker.conf
ARGS ?=
run: $(STAMP) bytecode
	$(BIN)/apogee standalone -c $(CONF) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks setup.py
	$(BIN)/ruff format --check src tests benchmarks setup.py

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# The dashboard tests drive Debian's Chromium (Playwright, no browser download of its own);
# it is installed once, when missing.
CHROMIUM ?= /usr/bin/chromium
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

# The compiled kernels must have been built here: their tests fail, not skip.
# Then the unit tests, the store's and the request path's tests once more on the interpreted
# sources (no Cython modules, no C GroupSync), which are what runs where no C compiler is at hand.
# The unit tests share nothing outside their tmp_path (no port, no broker, no fixed file) and
# are bound by CPU: they run on TEST_WORKERS processes (pytest-xdist). The others start
# brokers, clients and browsers of their own and mostly wait on them: they run on
# PROCESS_TEST_WORKERS, a file at a time on each (a module's processes are started once, and
# its tests may build on each other): three on two cores, as they keep the cores a little
# under half busy (measured here: 191 s on three, 304 s on two; on four, a test waiting
# 20 s for a restarted broker's registration ran out of time). The Spark tests run after
# them, one at a time: a Spark session's JVM and Python workers want both cores.
TEST_WORKERS ?= 2
PROCESS_TEST_WORKERS ?= 3
INTERPRETED_TESTS := tests/integration/remoting tests/integration/broker/test_send.py \
	tests/integration/broker/test_pull.py tests/integration/client/test_producer.py \
	tests/integration/client/test_push_consumer.py
test: java lint typecheck layers bytecode $(CHROMIUM)
	APOGEE_REQUIRE_SPEEDUPS=1 $(BIN)/pytest -q -n $(TEST_WORKERS) tests/unit
	APOGEE_REQUIRE_SPEEDUPS=1 $(BIN)/pytest -q -n $(PROCESS_TEST_WORKERS) --dist loadfile \
		--ignore=tests/unit --ignore=tests/spark
	APOGEE_REQUIRE_SPEEDUPS=1 $(BIN)/pytest -q tests/spark
	APOGEE_PURE_PYTHON=1 $(BIN)/pytest -q -n $(TEST_WORKERS) tests/unit
	APOGEE_PURE_PYTHON=1 $(BIN)/pytest -q -n $(PROCESS_TEST_WORKERS) --dist loadfile \
		$(INTERPRETED_TESTS)

clean:
	rm -rf $(VENV) build .mypy_cache .pytest_cache .ruff_cache
