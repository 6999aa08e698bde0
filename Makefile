# Context Governance: `make run` serves the demo, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast test-cov lint complexity format worker beat migrate demo bench clean check-deploy

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed-base

## run: create .venv, install, migrate, load the demo workspace, resume the jobs a killed
## server left running (without a broker they run inside the server), serve http://127.0.0.1:8000
run: $(VENV)/.installed-base
	DJANGO_DEBUG=1 $(BIN)/python manage.py migrate --noinput
	DJANGO_DEBUG=1 $(BIN)/python manage.py seed_demo
	DJANGO_DEBUG=1 $(BIN)/python manage.py requeue_stale_jobs --server-start
	@echo "Serving on http://$(HOST):$(PORT)/  (sign in with one of the demo logins above)"
	DJANGO_DEBUG=1 $(BIN)/python manage.py runserver $(HOST):$(PORT)

## test: install and run the whole suite (uses DATABASE_URL / CELERY_BROKER_URL when set)
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m "not browser and not celery_worker" $(PYTEST_ARGS)

## test-cov: the fast suite under coverage; prints the line coverage of the apps
test-cov: $(VENV)/.installed-dev
	mkdir -p var
	$(BIN)/coverage run -m pytest -m "not browser and not celery_worker" $(PYTEST_ARGS)
	$(BIN)/coverage report --format=total

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tests.complexity
	$(BIN)/python -m tests.import_cycles

## complexity: list functions over cyclomatic complexity 15 (radon), outside analysis/ and
## formats/; report only (tests/governance/test_complexity.py stops the count growing)
complexity: $(VENV)/.installed-dev
	$(BIN)/python -m tests.complexity

format: $(VENV)/.installed-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## worker: a Celery worker (needs CELERY_BROKER_URL, e.g. redis://127.0.0.1:6379/0)
worker: $(VENV)/.installed-base
	$(BIN)/celery -A governance worker --loglevel=INFO --queues=default,ingest,analysis,maintenance

## beat: the Celery beat scheduler: artifact purges, and every minute the sweep that requeues jobs whose worker was lost
beat: $(VENV)/.installed-base
	$(BIN)/celery -A governance beat --loglevel=INFO

migrate: $(VENV)/.installed-base
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py seed_demo

check-deploy: $(VENV)/.installed-base
	DJANGO_DEBUG=0 DJANGO_SECRET_KEY=$$($(BIN)/python -c "import secrets;print(secrets.token_urlsafe(64))") \
	DJANGO_ALLOWED_HOSTS=example.org $(BIN)/python manage.py check --deploy --fail-level WARNING

bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) var/staticfiles .pytest_cache
