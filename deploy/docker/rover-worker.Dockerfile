# syntax=docker/dockerfile:1
# rover-worker: consumes turns, runs the agent loop, calls the model and the tools.
# Build from the repository root:
#   docker build -f deploy/docker/rover-worker.Dockerfile -t rover-worker:dev .
# The builder is Debian 12 (bookworm) like the runtime, so the binary needs no newer glibc than
# the runtime has. The runtime holds the binary and what it reads, CA certificates and glibc: no
# shell, no package manager, no compiler, and it runs as the distroless nonroot user (65532).

ARG RUST_VERSION=1.95
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p rover-worker \
 && install -D -m 0755 target/release/rover-worker /out/rover-worker

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/rover-worker /usr/local/bin/rover-worker
# The skills the agent loads at start-up (a bad skill fails start-up, naming the file).
COPY --from=build /src/skills /app/skills
WORKDIR /app
USER 65532:65532
ENV ROVER_HTTP__LISTEN=0.0.0.0:9091 \
    ROVER_TELEMETRY__FORMAT=json \
    ROVER_AGENT__SKILLS_DIR=/app/skills
EXPOSE 9091
ENTRYPOINT ["/usr/local/bin/rover-worker"]
