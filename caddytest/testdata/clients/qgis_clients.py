#!/usr/bin/python3
"""QGIS 3.22 (Debian's python3-qgis) against a running tile_cache.

Run by caddytest/clients_test.go with Debian's own Python:

    qgis_clients.py CADDY UPSTREAM METRICS

The same site as clients.py (layer test:polygons in EPSG:4326 and
EPSG:900913, 4x4 metatiles, WMTS at /wmts, TMS at /tms, XYZ at /xyz).
QGIS draws zoom level 2 of the layer through each way an operator adds it:
WMTS from the plain /wmts URL (QGIS asks it SERVICE=WMS&REQUEST=
GetCapabilities) in EPSG:3857, EPSG:900913 and EPSG:4326, XYZ, TMS (XYZ
with {-y}), WMS-C from the TILED=true capabilities, and untiled WMS from
the passed-through MapServer capabilities. Each drawing must equal the
upstream's own render pixel for pixel (an EPSG:3857 project over the
EPSG:3857 matrix set is not reprojected, so it has no seam), no tile
request may pass the cache by, and a second drawing in a fresh QGIS must
be all cache hits. Every drawing runs in a child process with an empty
HOME, so QGIS's own network and tile caches start empty. Exits 1 with a
line per failure.
"""

import os
import sys
import xml.etree.ElementTree as ET

import numpy as np

import qgisdraw
from checks import LAYER, WORLD_MERC, Counters, check, failures, fetch, upstream_png


CADDY, UPSTREAM, METRICS = sys.argv[1:4]
COUNTERS = Counters(METRICS)
counters, delta = COUNTERS.now, COUNTERS.delta


def decode(png):
    """PNG bytes as an RGBA array, through Qt (no GDAL needed here)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from qgis.PyQt.QtGui import QImage
    img = QImage.fromData(png, "PNG").convertToFormat(QImage.Format_RGBA8888)
    bits = img.constBits()
    bits.setsize(img.sizeInBytes())
    return np.frombuffer(bits, np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)[:, :img.width()].copy()


def upstream(srs, bbox, w, h):
    return decode(upstream_png(UPSTREAM, srs, bbox, w, h))


REF = {
    "EPSG:4326": np.hstack([upstream("EPSG:4326", (-180, -90, 0, 90), 1024, 1024),
                            upstream("EPSG:4326", (0, -90, 180, 90), 1024, 1024)]),
    "EPSG:3857": upstream("EPSG:3857", (-WORLD_MERC, -WORLD_MERC, WORLD_MERC, WORLD_MERC), 1024, 1024),
}
VIEW = {  # level 2 of each gridset, drawn at its own resolution
    "EPSG:4326": ((-180, -90, 180, 90), (2048, 1024)),
    "EPSG:3857": ((-WORLD_MERC, -WORLD_MERC, WORLD_MERC, WORLD_MERC), (1024, 1024)),
}


def qgis_draws(uri, crs):
    extent, size = VIEW[crs]
    return qgisdraw.qgis_draws(uri, crs, extent, size)


def same(a, ref, what):
    """Equal alpha everywhere and equal colour wherever the pixel is
    opaque; QGIS composes in premultiplied ARGB, so a partly transparent
    pixel's colour is compared to within that rounding (1/alpha)."""
    if not check(a.shape == ref.shape, f"{what}: {a.shape[1]}x{a.shape[0]} px, upstream {ref.shape[1]}x{ref.shape[0]}"):
        return
    alpha = ref[:, :, 3].astype(int)
    alpha_ok = np.array_equal(a[:, :, 3], ref[:, :, 3])
    opaque = alpha == 255
    differ = int((a[:, :, :3] != ref[:, :, :3]).any(axis=2)[opaque].sum())
    partial = (alpha > 0) & (alpha < 255)
    tol = np.ceil(255.0 / np.maximum(alpha, 1))[:, :, None]
    partial_ok = bool((np.abs(a[:, :, :3].astype(int) - ref[:, :, :3].astype(int)) <= tol)[partial].all())
    colours = len(np.unique(ref.reshape(-1, 4), axis=0))
    check(alpha_ok and differ == 0 and partial_ok,
          f"{what}: pixels equal the upstream's render ({colours} colours, {differ} opaque pixels differ, "
          f"alpha {'equal' if alpha_ok else 'differs'}, {int(partial.sum())} partly transparent)")


def tiles_twice(what, uri, crs, tiles):
    before = counters()
    out, a = qgis_draws(uri, crs)
    d = delta(before)
    if not check(out["valid"] and not out["errors"], f"{what}: QGIS layer valid and drawn ({out['errors']})"):
        return
    check(out["crs"] == crs, f"{what}: layer CRS {out['crs']}")
    same(a, REF[crs], what)
    check(d["passthrough"] == 0 and d["hits"] + d["misses"] >= tiles,
          f"{what}: first drawing, {d['hits'] + d['misses']:.0f} tile requests, {d['passthrough']:.0f} passed the cache by")
    before = counters()
    out, _ = qgis_draws(uri, crs)
    d = delta(before)
    check(out["valid"] and d["hits"] >= tiles and d["misses"] == 0 and d["passthrough"] == 0,
          f"{what}: drawn again by a fresh QGIS, {d['hits']:.0f} hits for {tiles} tiles, {d['misses']:.0f} misses, "
          f"{d['passthrough']:.0f} pass-throughs")


def wmts_uri(ms, crs):
    # The plain service URL, as an operator pastes it: QGIS appends
    # SERVICE=WMS&REQUEST=GetCapabilities to it.
    return (f"contextualWMSLegend=0&crs={crs}&dpiMode=7&format=image/png&layers={LAYER}&styles=default"
            f"&tileMatrixSet={ms}&url={CADDY}/wmts")


tiles_twice("QGIS WMTS EPSG:3857", wmts_uri("EPSG:3857", "EPSG:3857"), "EPSG:3857", 16)
tiles_twice("QGIS WMTS EPSG:4326", wmts_uri("EPSG:4326", "EPSG:4326"), "EPSG:4326", 32)
tiles_twice("QGIS XYZ", f"type=xyz&url={CADDY}/xyz/{LAYER}/EPSG:900913/{{z}}/{{x}}/{{y}}.png&zmin=0&zmax=20",
            "EPSG:3857", 16)
tiles_twice("QGIS TMS", f"type=xyz&url={CADDY}/tms/1.0.0/{LAYER}@EPSG:900913@png/{{z}}/{{x}}/{{-y}}.png&zmin=0&zmax=20",
            "EPSG:3857", 16)

# WMS-C: QGIS names the TileSets of the TILED=true capabilities
# "<layers>-wmsc-<index>", in document order.
_, _, body = fetch(f"{CADDY}/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetCapabilities&TILED=true")
sets = list(ET.fromstring(body).iter("TileSet"))
for srs in ("EPSG:3857", "EPSG:4326"):
    idx = [i for i, ts in enumerate(sets) if ts.findtext("SRS") == srs and ts.findtext("Layers") == LAYER
           and ts.findtext("Format") == "image/png" and not (ts.findtext("Styles") or "").strip()]
    if check(len(idx) == 1, f"QGIS WMS-C {srs}: one PNG TileSet of the default style ({idx})"):
        tiles_twice(f"QGIS WMS-C {srs}", f"crs={srs}&dpiMode=7&format=image/png&layers={LAYER}&styles="
                    f"&tileMatrixSet={LAYER}-wmsc-{idx[0]}&url={CADDY}/wms?TILED%3Dtrue",
                    srs, 32 if srs == "EPSG:4326" else 16)

# Untiled WMS from MapServer's capabilities, passed through the cache: the
# GetMap URL they advertise must come back to the cache (one pass-through).
before = counters()
out, a = qgis_draws(f"crs=EPSG:4326&dpiMode=0&format=image/png&layers={LAYER}&styles=&url={CADDY}/wms", "EPSG:4326")
d = delta(before)
if check(out["valid"] and not out["errors"], f"QGIS WMS (untiled): layer valid and drawn ({out['errors']})"):
    check(d["passthrough"] >= 2, f"QGIS WMS (untiled): capabilities and GetMap came through the cache "
                                 f"({d['passthrough']:.0f} pass-throughs)")
    check(int((a[:, :, 3] > 0).sum()) > a.shape[0] * a.shape[1] // 2,
          f"QGIS WMS (untiled): the map is drawn ({int((a[:, :, 3] > 0).sum())} visible pixels)")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
