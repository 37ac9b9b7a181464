# syntax=docker/dockerfile:1
# Images of mcpqueue, one target per binary:
#   docker build --target api    -t mcpqueue/api .     # MCP front end; also `api tasks …`
#   docker build --target worker -t mcpqueue/worker .  # runs the demo tools (examples/demo)
# Static binaries on distroless, as a non-root user; nothing is fetched at
# run time. docker-compose.yml builds both.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/api ./cmd/worker

# distroless has no shell: busybox's static wget runs the health checks.
FROM busybox:1.37-musl AS probe

FROM gcr.io/distroless/static-debian12:nonroot AS base
COPY --from=probe /bin/busybox /bin/wget
WORKDIR /home/nonroot
USER nonroot:nonroot

FROM base AS api
COPY --from=build /out/api /usr/local/bin/api
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/api"]

FROM base AS worker
COPY --from=build /out/worker /usr/local/bin/worker
EXPOSE 9091
ENTRYPOINT ["/usr/local/bin/worker"]
