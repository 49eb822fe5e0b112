# One image per Terrace binary, from one parameterised Dockerfile:
#   docker build --build-arg MODULE=dt-binder --build-arg PACKAGE=. -t terrace/dt-binder .
# (make docker-build-<binary> passes the right arguments.)
# Static binary, distroless base, non-root user.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
ARG MODULE
ARG PACKAGE=.
# Reported by the deployers in status.deployer.version (main.version; the
# other binaries have no such variable, and -X ignores it).
ARG VERSION=dev
WORKDIR /src
# Module files first, so dependency downloads are cached across source changes.
# A binary's module needs only the shared modules apis and kit (binaries never
# require each other; make verify-dockerfile checks this list against each binary).
COPY apis/go.mod apis/go.sum apis/
COPY kit/go.mod kit/go.sum kit/
COPY ${MODULE}/go.mod ${MODULE}/go.sum ${MODULE}/
RUN --mount=type=cache,target=/root/go/pkg/mod cd ${MODULE} && GOWORK=off go mod download
COPY . .
# GOWORK=off: the image is built from the module's own go.mod (whose replace
# lines point at its siblings), exactly as `make verify-gowork-off` checks.
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd ${MODULE} && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/manager ${PACKAGE}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
