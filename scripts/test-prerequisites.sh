#!/usr/bin/env bash
# Installs, from Debian's packages, the servers and the browser the tests start, where they are missing.
# The tests run real redis-server, Redis Cluster (redis-cli), memcached and headless Chromium: none is
# an npm package, so `npm test` on a fresh machine would otherwise fail on the first that is absent.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v memcached >/dev/null 2>&1 || missing+=(memcached)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO=sudo
else
  echo "npm test needs these Debian packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "Installing the test prerequisites from Debian's packages: ${missing[*]}" >&2
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
