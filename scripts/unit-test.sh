#!/usr/bin/env bash
# make unit's go test: the flags and packages given, run by gotestsum (scripts/deps.sh installs it), which keeps
# go test's JSON events in build/unit-test.json so that scripts/stagetime.sh report can name the slowest
# packages and tests of every run; the console shows each package's result and, as go test prints them, the
# failed tests' output. Without gotestsum it is plain go test. Either way the console's text is also kept in
# build/unit-test.log.
#
#   scripts/unit-test.sh GO-TEST-FLAGS... PACKAGES...
set -uo pipefail
# A binary built with -race sleeps a second before it exits (the race detector's atexit_sleep_ms, default 1000),
# so that a report from another thread can finish. Every test binary and every child a test starts from its own
# binary paid it: about 75 seconds a stage, with the slot idle. The tests lose nothing without it: testing fails
# the test during which the detector found a race, before the binary exits. A GORACE of the caller's comes after
# and wins.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"
mkdir -p build
rm -f build/unit-test.json
gts="$("$(dirname "$0")/cache-bin.sh" gotestsum || true)"
if [ -z "$gts" ]; then
  echo "unit: gotestsum not found (scripts/deps.sh versitygw installs it); plain go test, no per-test times"
  "${GO:-go}" test "$@" 2>&1 | tee build/unit-test.log
  exit # with go test's status (pipefail)
fi
# GOTESTSUM_FORMAT is gotestsum's own setting; pkgname-and-test-fails prints a line per package and the
# output of each failed test, with go test's "--- FAIL:" lines.
GOTESTSUM_FORMAT=${GOTESTSUM_FORMAT:-pkgname-and-test-fails} \
  "$gts" --jsonfile build/unit-test.json --raw-command -- "${GO:-go}" test -json "$@" 2>&1 | tee build/unit-test.log
