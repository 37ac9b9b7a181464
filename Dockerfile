# Images of mcpqueue, one target per program, each FROM scratch: static
# binaries, a CA bundle, /etc/passwd and /etc/group for the numeric non-root
# user 65532 (nonroot), and /usr/local/bin/healthcheck (cmd/healthcheck) for
# health checks, as the images have no shell and no wget.
#   api     the MCP front end; also `api tasks …`
#   worker  runs the demo tools (internal/demo)
#   nats    nats-server at the version in go.mod, with JetStream's store on /data
#
# With a registry (pulls golang, downloads the modules), from the repository root:
#   docker build --target api    -t mcpqueue/api .
#   docker build --target worker -t mcpqueue/worker .
# and for the labels and --version (the context has no .git):
#   --build-arg VERSION=$(git describe --tags --always --dirty)
#   --build-arg REVISION=$(git rev-parse HEAD) --build-arg CREATED=$(git log -1 --format=%cI)
# Without one (CI): scripts/images.sh builds the binaries on the host and then
# these targets from them (--build-arg BINARIES=prebuilt, a prepared context).
# Both need BuildKit (the default since Docker 23; DOCKER_BUILDKIT=1 before),
# which builds only the stages a target uses. docker-compose.yml builds api and
# worker; deploy/compose.offline.yml runs it on scripts/images.sh's images.
ARG GO_VERSION=1.26.8
ARG BINARIES=build

# The binaries and the image root, as scripts/images.sh writes them: /out/bin/,
# /out/root/ (etc/), /out/home/nonroot/ and /out/data/ (both owned by 65532).
FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# No .git in the context: the version and revision come in as arguments.
ARG VERSION=dev
ARG REVISION=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    VERSION=${VERSION} REVISION=${REVISION} scripts/images.sh binaries /out

# The same, built outside: the context is a directory holding out/.
FROM scratch AS prebuilt
COPY out/ /out/

FROM ${BINARIES} AS bin

FROM scratch AS base
ARG VERSION=dev
ARG REVISION=
ARG CREATED=
LABEL org.opencontainers.image.source="https://github.com/mcpqueue/mcpqueue" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=bin /out/root/ /
COPY --from=bin --chown=65532:65532 /out/home/nonroot /home/nonroot
COPY --from=bin /out/bin/healthcheck /usr/local/bin/healthcheck
WORKDIR /home/nonroot
USER 65532:65532

FROM base AS api
LABEL org.opencontainers.image.title="mcpqueue api" \
      org.opencontainers.image.description="The MCP front end of mcpqueue (cmd/api)"
COPY --from=bin /out/bin/api /usr/local/bin/api
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/api"]

FROM base AS worker
LABEL org.opencontainers.image.title="mcpqueue worker" \
      org.opencontainers.image.description="An mcpqueue worker running the demo tools (cmd/worker)"
COPY --from=bin /out/bin/worker /usr/local/bin/worker
EXPOSE 9091
ENTRYPOINT ["/usr/local/bin/worker"]

# nats-server is not ours: its own source, version and license.
FROM base AS nats
ARG NATS_VERSION=
LABEL org.opencontainers.image.title="nats-server" \
      org.opencontainers.image.description="nats-server built from the version mcpqueue's go.mod requires" \
      org.opencontainers.image.source="https://github.com/nats-io/nats-server" \
      org.opencontainers.image.version="${NATS_VERSION}" \
      org.opencontainers.image.revision="v${NATS_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=bin /out/bin/nats-server /usr/local/bin/nats-server
COPY --from=bin --chown=65532:65532 /out/data /data
EXPOSE 4222 6222 8222
ENTRYPOINT ["/usr/local/bin/nats-server"]
