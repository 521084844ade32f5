# A static acp-conductor binary in a minimal image. Components run as
# subprocesses, so a real deployment copies the binary into an image that has
# the agent and proxies:  COPY --from=acp-conductor /acp-conductor /usr/local/bin/
# As the container's PID 1 it needs no init (docker run --init): it reaps
# whatever is orphaned in the container, and kills it as it ends.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /acp-conductor ./cmd/acp-conductor

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /acp-conductor /acp-conductor
ENTRYPOINT ["/acp-conductor"]
CMD ["--help"]
