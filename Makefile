# Rover's entry points. `make run` and `make test` are the two commands the README leads with.
.DEFAULT_GOAL := help
SHELL := bash
CARGO ?= cargo
NEXTEST_PROFILE := $(if $(CI),ci,default)

.PHONY: help run cluster test chaos bench eval eval-ci docs lint fmt services build deploy-check console chromium observe

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

services: ## Start the local RabbitMQ and Postgres if they are installed but stopped.
	@deploy/local/ensure-services.sh

build: ## Build every crate and binary.
	$(CARGO) build --workspace --bins

# The Hub console (console/): `npm ci` when its lock file changed, `npm run build` when any source
# did; console/dist/.built stamps a finished build, so an up-to-date console is not rebuilt.
CONSOLE_SOURCES := $(shell find console/src -type f 2>/dev/null) console/index.html console/vite.config.js console/package.json console/package-lock.json

console: console/dist/.built ## Build the Hub console into console/dist (skipped when up to date).

console/node_modules/.package-lock.json: console/package.json console/package-lock.json
	cd console && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

console/dist/.built: console/node_modules/.package-lock.json $(CONSOLE_SOURCES)
	cd console && npm run build --silent
	@touch $@

chromium: ## Install Debian's Chromium for the console's browser test, if it is missing.
	@deploy/local/ensure-chromium.sh

# `make run MODEL=local`: llama.cpp's llama-server with Qwen2.5-Coder-1.5B (scripts/llama-server.sh,
# as `make eval` runs it) instead of the scripted model. A MODEL from the environment counts only
# when it is one of the two (the name is common); on the command line any other word is refused.
RUN_MODEL := $(if $(filter command line,$(origin MODEL)),$(MODEL),$(if $(filter scripted local,$(MODEL)),$(MODEL),scripted))

run: services build console ## Run the three services against the local broker (Ctrl-C stops them); MODEL=local: on Qwen2.5-Coder-1.5B (llama-server) instead of the scripted model.
	@deploy/local/run.sh --model $(RUN_MODEL)

cluster: services build console ## Like `make run`, on a three-node RabbitMQ cluster started beside the default node (scripts/rabbitmq-cluster.sh; `scripts/rabbitmq-cluster.sh stop` stops it).
	@deploy/local/run.sh --model $(RUN_MODEL) --cluster

test: services build console chromium ## Run every test against the real RabbitMQ and Postgres.
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace --profile $(NEXTEST_PROFILE); \
	else \
		echo "cargo-nextest not found; using cargo test (install it with: cargo install cargo-nextest --locked)"; \
		$(CARGO) test --workspace; \
	fi

chaos: services build ## Faults that restart the shared RabbitMQ and Postgres; run alone, one test at a time.
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run -p rover-tests --test chaos --test-threads 1 --profile $(NEXTEST_PROFILE); \
	else \
		$(CARGO) test -p rover-tests --test chaos -- --test-threads 1; \
	fi

bench: services ## Benchmarks, release builds: a table, and JSON under target/bench/ (BENCH_ARGS="--only floor,tool-hop").
	$(CARGO) build --release --bins
	target/release/rover-bench $(BENCH_ARGS)

# The CI subset's pass threshold: 7 of its 8 cases (8/8 measured on 2026-12-06; docs/eval.md, *CI*).
EVAL_CI_MIN_PASS ?= 0.875

eval: services build ## Qwen2.5-Coder-1.5B on llama.cpp's llama-server (built/fetched once into ~/.cache/rover/llama), scored on the 36 staff chats; JSON in target/eval/ (EVAL_ARGS="--only list-departments").
	@scripts/eval.sh $(EVAL_ARGS)

eval-ci: services build ## The eval's CI subset against the real model; fails on an unintended write, a harness error, a turn without finish, or fewer than EVAL_CI_MIN_PASS passing.
	@scripts/eval.sh --subset ci --min-pass $(EVAL_CI_MIN_PASS) $(EVAL_ARGS)

docs: ## The result tables of docs/eval.md and docs/benchmarks.md from the runs in docs/results/ (no services); TAKE_LATEST=1 copies target/eval and target/bench's latest.json there first.
	$(CARGO) build -p rover-eval -p rover-bench --bins
	@scripts/docs.sh $(if $(TAKE_LATEST),--take-latest)

lint: ## Formatting and clippy, warnings as errors.
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt: ## Format the code.
	$(CARGO) fmt --all

observe: ## Prometheus at http://127.0.0.1:9099 scraping `make run`'s services, with the alert rules.
	@deploy/local/observe.sh

deploy-check: ## Render every Kubernetes overlay and validate it offline against schemas, and test the alert rules.
	@deploy/check.sh
