#!/usr/bin/env bash
# Usage: upstream/install.sh [mapserver]
#
# With "mapserver", only MapServer's packages (the README's first command
# needs no more); without, both upstreams' (the test suite).
#
# Installs, from Debian packages only, what the two real upstream WMSs need:
#   cgi-mapserver     the mapserv CGI/FastCGI binary (MapServer 8)
#   mapserver-bin     shptree and the other MapServer utilities
#   gdal-bin          ogr2ogr (CSV/WKT -> ESRI Shapefile)
#   lighttpd          the FastCGI front (started privately by start.sh)
#   fonts-dejavu-core DejaVu Sans TTF for labels
#   proj-data         the EPSG definitions (normally pulled in already)
#   curl              readiness probe in start.sh, manual testing
#   qgis-server       QGIS Server 3.22 (qgis_mapserv.fcgi, FastCGI behind
#                     the same lighttpd; upstream/qgis/)
#   python3-qgis      PyQGIS for Debian's /usr/bin/python3, which writes the
#                     QGIS project (upstream/qgis/project.py)
#
# Non-interactive; while installing, a temporary /usr/sbin/policy-rc.d that
# exits 101 keeps the packages from starting system services (lighttpd on
# port 80). It is removed afterwards, even on failure, and any pre-existing
# policy-rc.d is restored. Idempotent: when everything is already present it
# returns at once without touching apt.
set -euo pipefail

PACKAGES=(cgi-mapserver mapserver-bin gdal-bin lighttpd fonts-dejavu-core proj-data curl)
QGIS=1
case ${1:-} in
mapserver) QGIS=0 ;;
"") PACKAGES+=(qgis-server python3-qgis) ;;
*) echo "usage: upstream/install.sh [mapserver]" >&2; exit 2 ;;
esac

# True when a Debian package is installed (status "install ok installed").
pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# Fast path: every package installed and the binaries we call are on disk.
missing=()
for p in "${PACKAGES[@]}"; do
	pkg_installed "$p" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]] &&
	[[ -x /usr/lib/cgi-bin/mapserv ]] && { [[ $QGIS == 0 ]] || [[ -x /usr/lib/cgi-bin/qgis_mapserv.fcgi ]]; } &&
	command -v shptree >/dev/null && command -v ogr2ogr >/dev/null &&
	command -v lighttpd >/dev/null && command -v curl >/dev/null; then
	echo "upstream/install.sh: all packages already installed"
	exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
	echo "upstream/install.sh: must run as root to install: ${missing[*]}" >&2
	exit 1
fi

echo "upstream/install.sh: installing: ${missing[*]:-${PACKAGES[*]}}"

# Temporary policy-rc.d so that no service starts during the install.
POLICY=/usr/sbin/policy-rc.d
BACKUP=""
if [[ -e $POLICY ]]; then
	BACKUP=$(mktemp /tmp/policy-rc.d.backup.XXXXXX)
	cp -p "$POLICY" "$BACKUP"
fi
restore_policy() {
	if [[ -n $BACKUP ]]; then
		mv -f "$BACKUP" "$POLICY"
	else
		rm -f "$POLICY"
	fi
}
trap restore_policy EXIT
printf '#!/bin/sh\n# temporary, written by upstream/install.sh\nexit 101\n' >"$POLICY"
chmod 0755 "$POLICY"

export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing (fresh machine) or
# when a plain install fails because the lists are stale.
apt_install() {
	apt-get install -y -q --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${PACKAGES[@]}"
}
if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
	apt-get update -q
fi
if ! apt_install; then
	apt-get update -q
	apt_install
fi

# Belt and braces: should a package have started lighttpd anyway (e.g. under
# systemd, which ignores policy-rc.d for some paths), leave it as it is but
# tell the user, since it would hold port 80, not ours.
if pgrep -x lighttpd >/dev/null 2>&1; then
	echo "upstream/install.sh: note: a lighttpd process is running (not started by us on purpose)" >&2
fi

echo "upstream/install.sh: done"
