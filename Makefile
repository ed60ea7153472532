# kcoord: `make run` starts a development broker, `make test` runs every test.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

HOST     ?= 127.0.0.1
PORT     ?= 9092
DATA_DIR ?= ./data
ARGS     ?=

.PHONY: run test test-codecs bench install clean reference-kafka mutation fuzz chromium bytecode

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# The pipeline's extra (PySpark, pyarrow): `make test` and `make bench` need it, `make run` not.
PIPELINE_STAMP := $(VENV)/.pipeline-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
$(PIPELINE_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,pipeline]'
	rm -f $(VENV)/.pipeline-*
	touch $(PIPELINE_STAMP)

# Bytecode compiled ahead, as pip compiles an installed wheel's: an editable
# install otherwise compiles every module at each start where
# PYTHONDONTWRITEBYTECODE is set (about 200 ms of a broker's start).
SOURCES := broker protocol storage pipeline
bytecode: $(STAMP)
	@$(PY) -m compileall -q $(SOURCES) tests benchmarks >/dev/null

run: $(STAMP) bytecode
	$(VENV)/bin/kcoord serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR) $(ARGS)

# The slowest tests and the total time are printed at the end.  The codecs are
# checked against themselves at each API's oldest, first flexible and newest
# versions here (every version of the hot ones); `make test-codecs` checks
# every version of every API, and CI runs both.
test: $(PIPELINE_STAMP) chromium bytecode
	$(PY) -m pytest -q --durations=15 $(PYTEST_ARGS)

test-codecs: $(STAMP)
	KCOORD_CODEC_MATRIX=full $(PY) -m pytest -q -p no:cacheprovider \
		tests/protocol/test_codec_roundtrip.py tests/protocol/test_generated_codec.py

# The pipeline's report test renders its HTML page in headless Chromium (Debian's
# package): installed here when missing and this runs as root with apt-get.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (apt-get) for the report test"; \
	    apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	  else echo "note: the report test needs Chromium (Debian: apt-get install chromium)"; fi; }

# Resolve Apache Kafka (the reference the tests compare kcoord with) into ~/.cache/kcoord.
reference-kafka: $(STAMP)
	$(PY) -m tests.reference.kafka resolve

bench: $(PIPELINE_STAMP) bytecode
	$(PY) -m benchmarks

# A longer, random live-fuzz campaign than the one in `make test`; a frame that
# breaks the broker is saved in tests/fuzz/corpus and replayed first from then on.
FUZZ_EXAMPLES ?= 50000
fuzz: $(STAMP)
	KCOORD_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) KCOORD_FUZZ_RANDOM=1 $(PY) -m pytest -q -p no:cacheprovider \
		-o timeout=0 tests/fuzz

# Mutation testing of storage/, broker/topics/, broker/groups/ and broker/runtime/
# ([tool.mutmut] in pyproject.toml).  mutmut names modules after their paths, so it
# runs in .mutation/, a tree of links laid out as installed (kcoord/broker, ...);
# `cd .mutation && ../$(VENV)/bin/mutmut results` lists the survivors afterwards.
mutation: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,mutation]'
	mkdir -p .mutation/kcoord
	for d in broker protocol storage pipeline; do ln -sfn ../../$$d .mutation/kcoord/$$d; done
	for f in tests benchmarks pyproject.toml README.md docs; do ln -sfn ../$$f .mutation/$$f; done
	cd .mutation && ../$(VENV)/bin/mutmut run

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis mutants .mutation
