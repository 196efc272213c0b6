#!/usr/bin/env bash
# Installs the Debian packages mce's tests, demo and benchmark use, when missing:
# boto3 and the aws CLI (real AWS clients for the end-to-end script), wrk and
# nginx (benchmark), curl, docker-compose (the compose check), docker-registry
# (a real registry on 127.0.0.1 for the pull tests).
set -euo pipefail
need=()
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import boto3' 2>/dev/null || need+=(python3-boto3)
[ -x /usr/bin/aws ] || need+=(awscli)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
[ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing Debian packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "deps: installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
