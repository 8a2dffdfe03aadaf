# Two commands: `make run` and `make test`. Everything else is a helper for them.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test test-shuffled install services down status migrate demo bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): requirements.txt | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

services: install
	$(BIN)/python manage.py platform up

migrate: services
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py demo

run: demo
	$(BIN)/python manage.py platform serve

down:
	$(BIN)/python manage.py platform down

status:
	$(BIN)/python manage.py platform status

test: install
	$(BIN)/ruff check --quiet .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The tests in a random order that a seed repeats (pytest-randomly; pytest.ini keeps the order fixed otherwise), so
# state one test leaves behind for another shows up. A failure names its seed: rerun with that SEED to reproduce.
SEED ?= 1
test-shuffled: install
	$(BIN)/python -m pytest -p randomly -p no:cacheprovider --randomly-seed=$(SEED) $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/run_all.py

clean: down
	rm -rf var
