# Two entry points (see README): `make run` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run sidecar test test-unprivileged venv lint system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# The window's system libraries (Xvfb, Qt WebEngine's X/GL libs, fonts): apt-get, idempotent.
system-deps:
	bash scripts/install-system-deps.sh

venv: $(BIN)/python
	$(BIN)/pip install -e ".[dev,desktop]"

# Start the headless sidecar: ACP JSON-RPC on stdin/stdout, logs on stderr.
sidecar: $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -m sidecar $(ARGS)

# Start the desktop app: a window over the sidecar (needs a display; `make sidecar` has none).
run: system-deps $(BIN)/python
	$(BIN)/pip install -q -e ".[desktop]"
	$(BIN)/python -m desktop $(ARGS)

lint: venv
	$(BIN)/ruff check protocol sidecar desktop tests bench
	$(BIN)/ruff format --check protocol sidecar desktop tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo  # the layer table of docs/architecture.md (.importlinter)

# pytest exits non-zero (5) when no test ran, so an empty run fails too.
test: system-deps lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Only the group that runs the sidecar as a normal user (`make test` runs it too; as root
# it creates the user acp-tester: tests/unprivileged.py).
test-unprivileged: system-deps venv
	$(BIN)/python -m pytest -m unprivileged $(PYTEST_ARGS)
