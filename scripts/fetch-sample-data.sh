#!/usr/bin/env bash
# Lays out real game records for a first run under datasets/ (git-ignored).
#
# Source: Debian's `goban-original-games` package (596 Japanese professional
# title-match games, 1941-1997, GPL-2+), fetched from the Debian archive with
# `apt-get download`: nothing is installed system-wide and no root is needed
# beyond what apt itself asks for. The files (`.mgt` or `.sgf`) are all SGF;
# they are copied into `datasets/goban-original-games/` as `*.sgf` with their copyright file.
#
# Usage: scripts/fetch-sample-data.sh [DEST]   (default: datasets/goban-original-games)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$here/datasets/goban-original-games}

if [ -n "$(ls "$dest"/*.sgf 2>/dev/null | head -1)" ]; then
  echo "sample games already in $dest ($(ls "$dest"/*.sgf | wc -l) files)"
  exit 0
fi
command -v apt-get >/dev/null || { echo "error: apt-get not found; get goban-original-games from https://packages.debian.org/goban-original-games and unpack it into $dest" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 777 "$work" # apt's sandbox user must be able to write the download
(cd "$work" && apt-get download goban-original-games >/dev/null 2>&1) || {
  echo "apt-get download failed; refreshing the package lists (needs root) and trying again" >&2
  apt-get update >/dev/null
  (cd "$work" && apt-get download goban-original-games >/dev/null)
}
dpkg-deb -x "$work"/goban-original-games_*.deb "$work/unpacked"
mkdir -p "$dest"
# Most files are `.mgt`, some already `.sgf`: all are SGF.
for f in "$work"/unpacked/usr/share/goban/*.mgt "$work"/unpacked/usr/share/goban/*.sgf; do
  [ -e "$f" ] || continue
  # `X.mgt` becomes `X-mgt.sgf` (as in ../shared/datasets): some names exist with both endings.
  name=$(basename "$f"); case $name in *.mgt) name=${name%.mgt}-mgt.sgf ;; esac
  cp "$f" "$dest/$name"
done
cp "$work/unpacked/usr/share/doc/goban-original-games/copyright" "$dest/COPYRIGHT"
echo "$(ls "$dest"/*.sgf | wc -l) games from Debian's goban-original-games in $dest"
