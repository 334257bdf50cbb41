#!/usr/bin/env bash
# System packages the desktop window and its headless tests need (Debian/Ubuntu):
# Xvfb, Qt WebEngine's X and GL libraries, a font, bubblewrap, git, PostgreSQL, Node.js. Idempotent: when everything
# is already installed it changes nothing and needs no network.
set -euo pipefail

PACKAGES=(
  xvfb xauth
  libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0
  libnss3 libxcomposite1 libxdamage1 libxrandr2 libxtst6
  libgbm1 libegl1 libgl1 libasound2 fonts-dejavu-core
  bubblewrap git postgresql
  dbus-daemon  # a private session bus for the window's notification tests
  iproute2  # `ip`: the real agents' tests bring up loopback in their own network namespace
)

# Node.js >= 20 and npm: the TypeScript ACP SDK tests and the page's store tests. A node
# already on PATH (nvm, the distribution's, a tarball) is kept; only a machine without one
# gets the distribution's packages.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing system packages (${missing[*]}) and no apt-get: install them with your package manager" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
