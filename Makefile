# Two entry points, both self-installing on a fresh machine:
#   make run   - the main job (benchmark harness, quick mode) on local Spark and a local folder
#   make test  - type check + the full test suite (also installs Azurite with npm: make azurite)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
OUT ?= bench-results
# The optional JVM deletion-vector reader (jvm/), compiled against the jars of the installed pyspark
# by jvm/build_jar.py (the same code puts it into wheels: setup.py).
JAR := jvm/build/dvengine-spark.jar
JAVA_SRC := $(shell find jvm/src/main/java -name '*.java') jvm/build_jar.py
# Azurite, the Azure Storage emulator Microsoft ships (npm), for tests/test_storage_azure.py; kept
# under .tools/ (gitignored) and found there by tests/azure_support.py.
AZURITE_VERSION := 3.35.0
AZURITE_STAMP := .tools/azurite/.installed-$(AZURITE_VERSION)

.PHONY: run test check-java install jar azurite clean

check-java:
	@command -v java >/dev/null 2>&1 || { echo "ERROR: Java 17+ is required by Spark (install openjdk-17-jre-headless)"; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	 if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "ERROR: Java 17+ is required by Spark, found: $$(java -version 2>&1 | head -1)"; exit 1; fi

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

$(JAR): $(STAMP) $(JAVA_SRC)
	@command -v javac >/dev/null 2>&1 || { echo "ERROR: javac (a Java 17 JDK) is required to build $(JAR) (install openjdk-17-jdk-headless)"; exit 1; }
	$(BIN)/python jvm/build_jar.py --require --out $@

jar: $(JAR)

$(AZURITE_STAMP):
	@command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 || { echo "ERROR: npm and node are required to install Azurite, the Azure Blob emulator the Azure storage tests run against (install npm)"; exit 1; }
	npm install --prefix .tools/azurite azurite@$(AZURITE_VERSION) --no-audit --no-fund
	@test -x .tools/azurite/node_modules/.bin/azurite-blob || { echo "ERROR: npm did not install azurite-blob under .tools/azurite"; exit 1; }
	@touch $@

azurite: $(AZURITE_STAMP)

install: $(STAMP) $(JAR)

run: check-java install
	$(BIN)/dvengine bench --quick --out $(OUT)

test: check-java install azurite
	$(BIN)/python -m mypy
	$(BIN)/python -m ruff check dvengine tests
	$(BIN)/python -m pytest -q --durations=15 tests

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis jvm/build .tools
