# The collector image: the release binary on distroless, as uid 65532.
#
#   docker build -t ghcr.io/tether-dev/tether:dev .
#
# The cache mounts need BuildKit (the default builder of current Docker).

FROM rust:1.95-bookworm AS builder
WORKDIR /src
# The whole workspace: cargo reads every member's manifest even to build one package.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p collector \
    && install -D -m 0755 target/release/collector /out/collector

# glibc, libgcc_s and libm (all the binary links), CA certificates, a nonroot user; no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/collector /collector
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/collector"]
