# Multi-stage, multi-arch build: a static gateway binary in a small,
# non-root image. The build stage runs on the builder's own platform and
# cross-compiles for the target (no emulation), so
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=1.2.3 --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t tollgate/gateway:1.2.3 .
#
# builds both images. test.sh runs the same go build for both
# architectures, so a change that breaks either fails the suite even where
# no container engine runs.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="tollgate" \
      org.opencontainers.image.description="Reverse-proxy gateway with built-in rate limiting" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/tollgate/gateway" \
      org.opencontainers.image.documentation="https://github.com/tollgate/gateway#readme" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
COPY --from=build /out/gateway /usr/local/bin/gateway
COPY gateway.toml /etc/tollgate/gateway.toml
# Inside a container the listeners must bind every interface; keep the
# admin port off any public network. Beyond loopback the admin API needs a
# token, or the gateway refuses to start: set TOLLGATE_ADMIN_TOKEN_FILE (a
# mounted secret) or TOLLGATE_ADMIN_TOKEN_ENV (the variable holding it).
ENV TOLLGATE_SERVER_LISTEN=0.0.0.0:8080 \
    TOLLGATE_SERVER_ADMIN_LISTEN=0.0.0.0:9090
USER nonroot:nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["--config", "/etc/tollgate/gateway.toml"]
