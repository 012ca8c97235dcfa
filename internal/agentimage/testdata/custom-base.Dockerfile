# syntax=docker/dockerfile:1
# A user's Dockerfile: a build stage, then the image the agent works in.
ARG GO_VERSION=1.24

FROM docker.io/library/golang:${GO_VERSION}-bookworm AS build
RUN <<EOF
set -e
echo 'FROM inside a heredoc is not an instruction' > /note.txt
GOBIN=/out go install golang.org/x/tools/gopls@v0.18.1
EOF

FROM --platform=linux/amd64 docker.io/library/python:3.12-slim-bookworm AS work
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
# a comment inside a continuation is skipped
      git ripgrep \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/gopls /usr/local/bin/gopls
USER agent
RUN python3 -m pip install --user ruff
ENV LANG=C.UTF-8
