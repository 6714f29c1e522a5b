#!/usr/bin/env bash
# Install what gptmem needs and is missing (Debian/Ubuntu, apt-get).
#   required: gcc (with OpenMP), make, python3 (tests), curl (data download)
#   optional: OpenMPI (ZeRO over ranks), stb (PNG charts); the build says what it left out without them
# Runs apt-get only when something is missing; uses sudo when not root.
set -euo pipefail
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3)
command -v curl >/dev/null || command -v wget >/dev/null || need+=(curl)
command -v sha256sum >/dev/null || need+=(coreutils)
command -v cmp >/dev/null || need+=(diffutils)
# optional, installed when missing: OpenMPI for ZeRO over ranks (the build works without it)
command -v mpicc >/dev/null || need+=(libopenmpi-dev openmpi-bin)
# optional: stb for the PNG charts of `make compare`
[ -f /usr/include/stb/stb_image_write.h ] || need+=(libstb-dev)
if [ "${#need[@]}" -eq 0 ]; then exit 0; fi
echo "setup: installing ${need[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=sudo
  else echo "error: missing ${need[*]} and not root (no sudo); install them and retry" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
