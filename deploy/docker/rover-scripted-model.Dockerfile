# syntax=docker/dockerfile:1
# rover-scripted-model: the TEST DOUBLE of the model (OpenAI Chat Completions API from rules; not a
# model), for the dev overlay. Its rules.toml is embedded in the binary; --rules FILE overrides it.
# Build from the repository root:
#   docker build -f deploy/docker/rover-scripted-model.Dockerfile -t rover-scripted-model:dev .
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
    cargo build --release --locked -p rover-scripted-model \
 && install -D -m 0755 target/release/rover-scripted-model /out/rover-scripted-model

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/rover-scripted-model /usr/local/bin/rover-scripted-model
WORKDIR /app
USER 65532:65532
ENV ROVER_SCRIPTED__LISTEN=0.0.0.0:8090 \
    ROVER_TELEMETRY__FORMAT=json
EXPOSE 8090
ENTRYPOINT ["/usr/local/bin/rover-scripted-model"]
