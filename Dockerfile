# syntax=docker/dockerfile:1
#
# idemd container image.
#
#   docker build -t REGISTRY/idemd:0.1.0 .
#
# Stage 1 builds the release binary with the official Rust image; stage 2 ships it
# alone on distroless "cc" (glibc, libgcc, CA certificates, /etc/passwd; no shell, no
# package manager), running as the unprivileged "nonroot" user (65532). sqlx talks to
# PostgreSQL over rustls, so no OpenSSL is needed at run time.
#
# For reproducible builds pin both base images by digest (RUST_IMAGE=rust:1.95-bookworm@sha256:...).

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
# SQLX_OFFLINE: the build never needs a live database (idemd checks its queries at run time
# against its own migrations; this keeps any future compile-time checked query offline too).
ENV CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0 \
    SQLX_OFFLINE=true
COPY . .
# Cache mounts keep the crate registry and the target directory between builds; the
# binary is copied out of the cached target directory in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked \
    && install -D -m 0755 target/release/idemd /out/idemd \
    && mkdir -p /out/data

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="idemd" \
      org.opencontainers.image.description="Central gRPC service that makes side effects happen at most once per logical request" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/idemd /idemd
# Default data directory of the embedded SQLite store, writable by the runtime user.
COPY --from=build --chown=65532:65532 /out/data /var/lib/idemd
# Inside a container the servers must listen on all interfaces to be reachable;
# the Helm chart sets these (and everything else) explicitly as well.
ENV IDEMD_LISTEN=0.0.0.0:50051 \
    IDEMD_METRICS_LISTEN=0.0.0.0:9464 \
    IDEMD_DATA_DIR=/var/lib/idemd
USER 65532:65532
# `serve` needs TLS files (IDEMD_TLS_CERT, IDEMD_TLS_KEY) or IDEMD_INSECURE_PLAINTEXT=true
# (behind a mesh only); without either it refuses to start. The chart gives one or the other.
# 50051: gRPC API (idem.v1.IdempotencyService, grpc.health.v1.Health, reflection); 9464: /metrics.
EXPOSE 50051 9464
ENTRYPOINT ["/idemd"]
CMD ["serve"]
