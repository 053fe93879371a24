# syntax=docker/dockerfile:1
# rover-toolserver: consumes tool calls and runs the execute() pipeline; also `db setup` (migrations are embedded).
# Build from the repository root:
#   docker build -f deploy/docker/rover-toolserver.Dockerfile -t rover-toolserver:dev .
# The builder is Debian 12 (bookworm) like the runtime, so the binary needs no newer glibc than
# the runtime has. The runtime holds the binary, CA certificates and glibc: no
# shell, no package manager, no compiler, and it runs as the distroless nonroot user (65532).

ARG RUST_VERSION=1.95
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p rover-toolserver \
 && install -D -m 0755 target/release/rover-toolserver /out/rover-toolserver

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/rover-toolserver /usr/local/bin/rover-toolserver
WORKDIR /app
USER 65532:65532
ENV ROVER_HTTP__LISTEN=0.0.0.0:9092 \
    ROVER_TELEMETRY__FORMAT=json
EXPOSE 9092
ENTRYPOINT ["/usr/local/bin/rover-toolserver"]
