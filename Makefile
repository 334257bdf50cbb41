# Two entry points (see README): `make run` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test venv lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

venv: $(BIN)/python
	$(BIN)/pip install -e ".[dev]"

# Start the sidecar headless: ACP JSON-RPC on stdin/stdout, logs on stderr.
run: $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -m sidecar $(ARGS)

lint: venv
	$(BIN)/ruff check protocol sidecar desktop tests
	$(BIN)/ruff format --check protocol sidecar desktop tests
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)
