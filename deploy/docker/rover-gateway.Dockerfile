# syntax=docker/dockerfile:1
# rover-gateway: HTTP + SSE, JWT authentication, runtime-context minting, REST.
# Build from the repository root:
#   docker build -f deploy/docker/rover-gateway.Dockerfile -t rover-gateway:dev .
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
    cargo build --release --locked -p rover-gateway \
 && install -D -m 0755 target/release/rover-gateway /out/rover-gateway

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/rover-gateway /usr/local/bin/rover-gateway
WORKDIR /app
USER 65532:65532
# No Hub console in the image: it is a development page (its sign-in needs auth.development).
ENV ROVER_HTTP__LISTEN=0.0.0.0:8080 \
    ROVER_HTTP__CONSOLE_DIR= \
    ROVER_TELEMETRY__FORMAT=json
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/rover-gateway"]
