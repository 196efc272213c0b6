#!/usr/bin/env bash
# The folder where scripts/deps.sh installs the Go tools it builds once per machine (versitygw, gotestsum):
# ${MCE_CACHE:-/var/cache/mce}/bin, or ${XDG_CACHE_HOME:-~/.cache}/mce/bin where that is not writable.
#
#   scripts/cache-bin.sh --dir   makes the folder to install into and prints it
#   scripts/cache-bin.sh NAME    prints the path of NAME installed in either folder; exit status 1 when it is not
set -euo pipefail
system="${MCE_CACHE:-/var/cache/mce}/bin"
user="${XDG_CACHE_HOME:-$HOME/.cache}/mce/bin"
case "${1:-}" in
--dir)
  if mkdir -p "$system" 2>/dev/null && [ -w "$system" ]; then
    echo "$system"
  else
    mkdir -p "$user"
    echo "$user"
  fi
  ;;
"")
  echo "usage: cache-bin.sh --dir | NAME" >&2
  exit 2
  ;;
*)
  for d in "$system" "$user"; do
    if [ -x "$d/$1" ]; then
      echo "$d/$1"
      exit 0
    fi
  done
  exit 1
  ;;
esac
