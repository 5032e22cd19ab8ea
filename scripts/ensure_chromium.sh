#!/usr/bin/env bash
# Make Debian's headless-capable Chromium available for the report's rendering self-test.
# Installs it with apt-get when it is missing and this user can (root, or passwordless sudo); otherwise says
# why and exits 0: the self-test then skips with that reason rather than failing.
set -uo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_chromium: no apt-get here; install Chromium yourself to run the report rendering test" >&2
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "ensure_chromium: Chromium is missing and this user cannot apt-get install it; the rendering test will skip" >&2
  exit 0
fi
echo "ensure_chromium: installing Debian's chromium package (for the report rendering self-test)" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get (a provisioning script, unattended upgrades) may hold dpkg's lock: wait for it rather than skip.
apt_get=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600)
log="$(mktemp)"
if ! { "${apt_get[@]}" update -qq && "${apt_get[@]}" install -y -qq --no-install-recommends chromium fonts-dejavu-core; } >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "ensure_chromium: apt-get could not install chromium; the rendering test will skip" >&2
fi
rm -f "$log"
exit 0
