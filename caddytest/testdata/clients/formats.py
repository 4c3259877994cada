#!/usr/bin/python3
"""GDAL and QGIS read issue 31's tile formats from a running tile_cache.

Run by caddytest/formats_test.go with Debian's own Python (python3-gdal,
python3-qgis, python3-numpy):

    formats.py CADDY UPSTREAM METRICS

CADDY is the site's origin, serving /wmts, /tms and /xyz for layers
test:polygons (every format: image/png first, image/png8, image/jpeg,
image/vnd.jpeg-png, image/vnd.jpeg-png8, image/webp), test:relief (png,
png8, the mixed formats, webp; opaque, so the mixed formats' tiles are
JPEG) and test:lossy (test:relief as lossy WebP, quality 80), each in
EPSG:4326 and EPSG:900913 with 4x4 metatiles; UPSTREAM is MapServer;
METRICS Caddy's Prometheus endpoint.

GDAL: the WMTS driver takes no format in a WMTS: connection string; it
reads the first ResourceURL unless a GDAL_WMTS service description names
one with <Format>, which then picks that format's ResourceURL. So every
format is read through such a description (level 2 of EPSG:4326), and
the pixels are compared with the same level read in image/png: equal for
the lossless formats (png, lossless WebP, and the mixed formats' PNG
tiles of test:polygons), above a PSNR floor for the others. That the read
really went to the format's tiles is checked on the cache: right after
the read, a tile of that format's own tile set (which nothing else
filled) is a HIT. A second read is all hits.

QGIS: draws level 2 of EPSG:3857 from XYZ (type=xyz, the format's
extension) and from WMTS (format=<MIME> in the URI) in a child process
with an empty HOME, with no error, and the drawing is compared with QGIS's
drawing of the PNG tiles: equal for the lossless formats, above a PSNR
floor for the others. Exits 1 with a line per failure.
"""

import sys
import urllib.parse

import numpy as np
from osgeo import gdal

import qgisdraw
from checks import WORLD_MERC, Counters, check, failures, fetch

gdal.UseExceptions()
gdal.SetConfigOption("GDAL_HTTP_TIMEOUT", "60")
gdal.SetConfigOption("GDAL_ENABLE_WMS_CACHE", "NO")
gdal.SetConfigOption("GDAL_DEFAULT_WMS_CACHE_PATH", "/nonexistent")

# (layer, format, extension, floor): floor None is exact (for a mixed
# format: its PNG tiles exact), else a PSNR floor in dB against the PNG
# read. A mixed format's JPEG tiles are held to the JPEG floor.
JPEG_FLOOR = 32.0
CASES = [
    ("test:polygons", "image/png", "png", None),
    ("test:polygons", "image/png8", "png8", 35.0),
    ("test:polygons", "image/jpeg", "jpeg", JPEG_FLOOR),
    ("test:polygons", "image/vnd.jpeg-png", "jpeg-png", None),
    ("test:polygons", "image/vnd.jpeg-png8", "jpeg-png8", 35.0),
    ("test:polygons", "image/webp", "webp", None),
    ("test:relief", "image/png", "png", None),
    ("test:relief", "image/png8", "png8", 30.0),
    ("test:relief", "image/vnd.jpeg-png", "jpeg-png", JPEG_FLOOR),
    ("test:relief", "image/vnd.jpeg-png8", "jpeg-png8", JPEG_FLOOR),
    ("test:relief", "image/webp", "webp", None),
    ("test:lossy", "image/webp", "webp", 28.0),
]
# The layer whose image/png read is the reference for each layer.
PNG_OF = {"test:polygons": "test:polygons", "test:relief": "test:relief", "test:lossy": "test:relief"}


def psnr(a, b):
    """PSNR of two RGBA arrays as module/imaging's PSNR: over R, G, B and
    A, every fully transparent pixel counted as one colour."""
    a = a.astype(np.int64).copy()
    b = b.astype(np.int64).copy()
    a[a[:, :, 3] == 0] = 0
    b[b[:, :, 3] == 0] = 0
    mse = ((a - b) ** 2).mean()
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def flatten(a):
    """An RGBA array composed onto white: what a JPEG of it shows."""
    alpha = a[:, :, 3:4].astype(np.float64) / 255
    rgb = a[:, :, :3] * alpha + 255 * (1 - alpha)
    return np.dstack([np.round(rgb).astype(np.uint8), np.full(a.shape[:2], 255, np.uint8)])


def compare(what, a, ref, floor, mixed_jpeg=None):
    """Exact (floor None) or PSNR >= floor. For a mixed format
    (mixed_jpeg: its JPEG tiles' floor) each 256-pixel tile is held to
    the rule the cache follows: JPEG where the PNG read is opaque and of
    more than one colour (PSNR >= mixed_jpeg), else PNG (exact, or >= floor)."""
    if not check(a.shape == ref.shape, f"{what}: {a.shape}, reference {ref.shape}"):
        return
    if mixed_jpeg is not None:
        jpeg, worst = 0, float("inf")
        ok = True
        for y in range(0, ref.shape[0], 256):
            for x in range(0, ref.shape[1], 256):
                r, t = ref[y:y + 256, x:x + 256], a[y:y + 256, x:x + 256]
                is_jpeg = r[:, :, 3].min() == 255 and len(np.unique(r.reshape(-1, 4), axis=0)) > 1
                p = psnr(t, r)
                tile_floor = mixed_jpeg if is_jpeg else floor
                jpeg += is_jpeg
                if tile_floor is None:
                    ok = ok and p == float("inf")
                else:
                    ok = ok and p >= tile_floor
                    worst = min(worst, p)
        n = ref.shape[0] * ref.shape[1] // 65536
        check(ok, f"{what}: {jpeg} of {n} tiles JPEG (PSNR >= {mixed_jpeg}), the others PNG "
                  f"({'exact' if floor is None else f'PSNR >= {floor}'}); worst PSNR {worst:.2f} dB")
        return
    p = psnr(a, ref)
    if floor is None:
        differ = int((a != ref).any(axis=2)[ref[:, :, 3] > 0].sum())
        check(p == float("inf"), f"{what}: pixels equal the PNG read ({differ} visible pixels differ)")
    else:
        check(p >= floor, f"{what}: PSNR {p:.2f} dB against the PNG read, floor {floor}")


def tile_result(url):
    try:
        status, hdr, body = fetch(url)
    except Exception as e:  # an HTTP error
        return f"error {e}", "", b""
    return hdr.get("Geowebcache-Cache-Result", hdr.get("geowebcache-cache-result", "")), hdr.get("Content-Type", ""), body


CADDY, UPSTREAM, METRICS = sys.argv[1:4]

COUNTERS = Counters(METRICS)
counters, delta = COUNTERS.now, COUNTERS.delta
MERC = (-WORLD_MERC, -WORLD_MERC, WORLD_MERC, WORLD_MERC)


# --- QGIS (a child process per drawing: fresh caches, empty HOME) ---

def qgis_draws(uri):
    return qgisdraw.qgis_draws(uri, "EPSG:3857", MERC, [1024, 1024])


# --- GDAL ---

def gdal_wmts(layer, fmt):
    """A GDAL_WMTS service description: the format picks the ResourceURL."""
    caps = f"{CADDY}/wmts?SERVICE=WMTS&amp;REQUEST=GetCapabilities"
    return (f"<GDAL_WMTS><GetCapabilitiesUrl>{caps}</GetCapabilitiesUrl><Layer>{layer}</Layer>"
            f"<TileMatrixSet>EPSG:4326</TileMatrixSet><Format>{fmt}</Format><Cache/></GDAL_WMTS>").replace("<Cache/>", "")


def gdal_level2(layer, fmt):
    """Level 2 of EPSG:4326 (2048x1024) as RGBA, read by GDAL's WMTS."""
    ds = gdal.Open(gdal_wmts(layer, fmt))
    b = ds.GetRasterBand(1)
    k = [i for i in range(b.GetOverviewCount()) if (b.GetOverview(i).XSize, b.GetOverview(i).YSize) == (2048, 1024)]
    assert k, "no 2048x1024 level among the overviews"
    bands = [ds.GetRasterBand(i + 1).GetOverview(k[0]) for i in range(ds.RasterCount)]
    a = np.dstack([band.ReadAsArray() for band in bands])
    if a.shape[2] == 3:
        a = np.dstack([a, np.full(a.shape[:2], 255, np.uint8)])
    return a


def decode(data):
    gdal.FileFromMemBuffer("/vsimem/tile", data)
    try:
        ds = gdal.Open("/vsimem/tile")
        a = np.dstack([ds.GetRasterBand(i + 1).ReadAsArray() for i in range(ds.RasterCount)])
    finally:
        gdal.Unlink("/vsimem/tile")
    if a.shape[2] == 3:
        a = np.dstack([a, np.full(a.shape[:2], 255, np.uint8)])
    return a


# Which tiles of each layer are JPEG in the mixed formats: MapServer's
# relief is opaque everywhere; test:polygons never fully opaque.
PNG_READ = {}
for layer, fmt, ext, floor in CASES:
    what = f"GDAL WMTS {layer} {fmt}"
    # This tile set is filled only by this read: before it, the probe
    # tile would be a MISS.
    probe = f"{CADDY}/xyz/{layer}/EPSG:4326/2/5/1.{ext}"
    before = counters()
    try:
        a = gdal_level2(layer, fmt)
    except Exception as e:
        check(False, f"{what}: GDAL reads level 2 ({e})")
        continue
    d = delta(before)
    check(d["misses"] >= 1 and d["passthrough"] == 0,
          f"{what}: first read through the cache ({d['hits']:.0f} hits, {d['misses']:.0f} misses, {d['passthrough']:.0f} pass-throughs)")
    result, ctype, body = tile_result(probe)
    check(result == "HIT", f"{what}: GDAL read the {ext} tiles (a tile of that set is now {result}, {ctype})")
    if fmt == "image/png":
        PNG_READ[layer] = a
        check(a[:, :, 3].min() < 255 if layer == "test:polygons" else a[:, :, 3].min() == 255,
              f"{what}: alpha as MapServer renders the layer (min {a[:, :, 3].min()})")
        continue
    ref = PNG_READ[PNG_OF[layer]]
    if fmt == "image/jpeg":
        compare(what, a, flatten(ref), floor)
    elif "jpeg-png" in fmt:
        compare(what, a, ref, 35.0 if fmt.endswith("png8") else None, mixed_jpeg=JPEG_FLOOR)
    else:
        compare(what, a, ref, floor)
    # A mixed format on the relief: JPEG tiles, as the probe shows.
    if "jpeg-png" in fmt:
        want = "image/jpeg" if layer == "test:relief" else "image/png"
        check(ctype == want, f"{what}: a tile answered as {ctype}, want {want}")
    # Read again: every tile of the level a hit.
    before = counters()
    gdal_level2(layer, fmt)
    d = delta(before)
    check(d["hits"] >= 32 and d["misses"] == 0 and d["passthrough"] == 0,
          f"{what}: read again, {d['hits']:.0f} hits, {d['misses']:.0f} misses, {d['passthrough']:.0f} pass-throughs")


# --- QGIS: XYZ and WMTS in each format, EPSG:3857 level 2 ---
QGIS_CASES = [
    ("test:polygons", "image/png", "png", None),
    ("test:polygons", "image/png8", "png8", 35.0),
    ("test:polygons", "image/vnd.jpeg-png8", "jpeg-png8", 35.0),
    ("test:polygons", "image/webp", "webp", None),
    ("test:relief", "image/png", "png", None),
    ("test:relief", "image/vnd.jpeg-png8", "jpeg-png8", JPEG_FLOOR),
    ("test:relief", "image/webp", "webp", None),
    ("test:lossy", "image/webp", "webp", 28.0),
]
QGIS_PNG = {}
for layer, fmt, ext, floor in QGIS_CASES:
    for kind in ("WMTS", "XYZ"):
        what = f"QGIS {kind} {layer} {fmt}"
        if kind == "XYZ":
            uri = f"type=xyz&url={CADDY}/xyz/{layer}/EPSG:900913/{{z}}/{{x}}/{{y}}.{ext}&zmin=0&zmax=20"
        else:
            uri = (f"contextualWMSLegend=0&crs=EPSG:3857&dpiMode=7&format={fmt}&layers={layer}&styles=default"
                   f"&tileMatrixSet=EPSG:3857&url={CADDY}/wmts")
        before = counters()
        out, a = qgis_draws(uri)
        d = delta(before)
        if not check(out["valid"] and not out["errors"] and a is not None, f"{what}: QGIS layer valid and drawn ({out['errors']})"):
            continue
        check(d["passthrough"] == 0 and d["hits"] + d["misses"] >= 16,
              f"{what}: {d['hits'] + d['misses']:.0f} tile requests through the cache, {d['passthrough']:.0f} passed it by")
        if kind == "WMTS":
            # WMTS goes first: its tiles, not another format's, filled the set.
            result, ctype, _ = tile_result(f"{CADDY}/xyz/{layer}/EPSG:900913/2/1/1.{ext}")
            check(result == "HIT", f"{what}: QGIS read the {ext} tiles (a tile of that set is now {result})")
        check(int((a[:, :, 3] > 0).sum()) > a.shape[0] * a.shape[1] // 2,
              f"{what}: the map is drawn ({int((a[:, :, 3] > 0).sum())} visible pixels)")
        if fmt == "image/png":
            QGIS_PNG[(kind, layer)] = a
            continue
        ref = QGIS_PNG[(kind, PNG_OF[layer])]
        if "jpeg-png" in fmt:
            # QGIS draws tile by tile, unscaled (level 2 at its resolution):
            # each 256-pixel block is a tile.
            compare(what, a, ref, 35.0, mixed_jpeg=JPEG_FLOOR)
        else:
            compare(what, a, ref, floor)

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
