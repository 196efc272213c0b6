#!/usr/bin/env bash
# Runs versitygw (github.com/versity/versitygw, Apache-2.0), a real S3-compatible server, with the given arguments:
# the binary scripts/deps.sh installs (make deps), found where it puts it, or $MCE_VERSITYGW, versitygw on PATH,
# or $(go env GOPATH)/bin. `scripts/versitygw.sh --path` prints the binary's path instead.
#
#   ROOT_ACCESS_KEY=key ROOT_SECRET_KEY=secret scripts/versitygw.sh --port 127.0.0.1:7070 posix /some/folder
set -euo pipefail
for c in ${MCE_VERSITYGW:-} "$("$(dirname "$0")/cache-bin.sh" versitygw || true)" \
  "$(command -v versitygw || true)" "$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin/versitygw"; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    [ "${1:-}" = --path ] && { echo "$c"; exit 0; }
    exec "$c" "$@"
  fi
done
echo "versitygw is not installed: run 'make deps' (or go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)" >&2
exit 1
