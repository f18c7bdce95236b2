# Multi-stage build: a static gateway binary in a small, non-root image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
COPY gateway.toml /etc/tollgate/gateway.toml
# Inside a container the listeners must bind every interface; keep the
# admin port off any public network.
ENV TOLLGATE_SERVER_LISTEN=0.0.0.0:8080 \
    TOLLGATE_SERVER_ADMIN_LISTEN=0.0.0.0:9090
USER nonroot:nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["--config", "/etc/tollgate/gateway.toml"]
