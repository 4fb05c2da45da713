#!/usr/bin/env bash
# Download Debian source packages (the upstream tarball, .dsc and Debian changes) into a
# directory, for `make real-world`:
#
#   scripts/fetch_deb_sources.sh DIR zlib gsl cjson
#
# apt needs a deb-src entry for that; one is added (for the suites the machine already uses)
# when none exists, followed by one `apt-get update`. Already downloaded packages are kept.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=apt_lib.sh
source "$here/apt_lib.sh"

dest="$1"
shift
mkdir -p "$dest"

has_deb_src() {
  grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/
}

if ! has_deb_src; then
  log "adding a deb-src entry for apt (/etc/apt/sources.list.d/polyflow-deb-src.sources)"
  # the suites and mirror of the first deb822 entry, else Debian stable's
  uris="http://deb.debian.org/debian"
  suites="$(. /etc/os-release && echo "${VERSION_CODENAME:-stable}")"
  entry="Types: deb-src
URIs: $uris
Suites: $suites
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"
  printf '%s' "$entry" | as_root tee /etc/apt/sources.list.d/polyflow-deb-src.sources >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
fi

cd "$dest"
for package in "$@"; do
  if compgen -G "${package}_*.dsc" >/dev/null; then
    continue
  fi
  log "apt-get source --download-only $package"
  if ! apt-get source --download-only "$package" >/dev/null 2>apt-source.log; then
    # a deb-src entry that apt has not read yet
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt-get source --download-only "$package" >/dev/null
  fi
done
