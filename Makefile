# kcoord: `make run` starts a development broker, `make test` runs every test.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

HOST     ?= 127.0.0.1
PORT     ?= 9092
DATA_DIR ?= ./data

.PHONY: run test bench install clean reference-kafka mutation fuzz

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/kcoord serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Resolve Apache Kafka (the reference the tests compare kcoord with) into ~/.cache/kcoord.
reference-kafka: $(STAMP)
	$(PY) -m tests.reference.kafka resolve

bench: $(STAMP)
	$(PY) -m benchmarks

# A longer, random live-fuzz campaign than the one in `make test`; a frame that
# breaks the broker is saved in tests/fuzz/corpus and replayed first from then on.
FUZZ_EXAMPLES ?= 50000
fuzz: $(STAMP)
	KCOORD_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) KCOORD_FUZZ_RANDOM=1 $(PY) -m pytest -q -p no:cacheprovider \
		-o timeout=0 tests/fuzz

# Mutation testing of storage/, broker/topics/ and broker/groups/ ([tool.mutmut] in pyproject.toml);
# `$(VENV)/bin/mutmut results` lists the survivors afterwards.
mutation: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,mutation]'
	$(VENV)/bin/mutmut run

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis mutants
