# The collector image: the release binary on distroless, as uid 65532.
#
#   docker build -t ghcr.io/tether-dev/tether:dev .
#
# The cache mounts need BuildKit (the default builder of current Docker).
#
# Both base images are pinned by digest, so a rebuild starts from the bytes that were reviewed;
# the tag beside each digest says what it was, and moving to a newer one means changing both.

FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS builder
WORKDIR /src
# The whole workspace: cargo reads every member's manifest even to build one package.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p collector \
    && install -D -m 0755 target/release/collector /out/collector

# glibc, libgcc_s and libm (all the binary links), CA certificates, a nonroot user; no shell.
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=builder /out/collector /collector
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/collector"]
