#!/usr/bin/python3
"""GIS clients against a running tile_cache: GDAL and OWSLib from Debian.

Run by caddytest/clients_test.go with Debian's own Python (which has the
python3-gdal and python3-owslib packages):

    clients.py CADDY UPSTREAM METRICS

CADDY is the site's origin (http://localhost:9080), serving WMS at /wms
and the services at /wmts, /tms and /xyz for layer test:polygons
(EPSG:4326 and EPSG:900913, 4x4 metatiles, no gutter, no parameter
filters); UPSTREAM the MapServer GetMap URL behind it; METRICS Caddy's
Prometheus endpoint. For every protocol a client reads zoom level 2 of
the layer, and the pixels must equal the upstream's own render of the
metatiles the cache fetches; read again, every tile must be a cache hit,
and no request may pass the cache by. Every URL the capabilities
advertise is followed. Exits 1 with a line per failure.
"""

import sys
import xml.etree.ElementTree as ET

import numpy as np
from osgeo import gdal
from owslib.tms import TileMapService
from owslib.wms import WebMapService
from owslib.wmts import WebMapTileService

from checks import LAYER, WORLD_MERC, Counters, check, failures, fetch, upstream_png

gdal.UseExceptions()
gdal.SetConfigOption("GDAL_HTTP_TIMEOUT", "60")
gdal.SetConfigOption("GDAL_ENABLE_WMS_CACHE", "NO")  # every read asks the server
gdal.SetConfigOption("GDAL_DEFAULT_WMS_CACHE_PATH", "/nonexistent")

CADDY, UPSTREAM, METRICS = sys.argv[1:4]
COUNTERS = Counters(METRICS)
counters, delta = COUNTERS.now, COUNTERS.delta


def decode(png):
    """An encoded image as an RGBA array (height, width, 4)."""
    gdal.FileFromMemBuffer("/vsimem/img", png)
    try:
        ds = gdal.Open("/vsimem/img")
        a = np.dstack([ds.GetRasterBand(i + 1).ReadAsArray() for i in range(ds.RasterCount)])
    finally:
        gdal.Unlink("/vsimem/img")
    if a.shape[2] == 3:
        a = np.dstack([a, np.full(a.shape[:2], 255, np.uint8)])
    return a


def upstream(srs, bbox, w, h):
    """The upstream's render of one metatile, as the cache asks for it."""
    return decode(upstream_png(UPSTREAM, srs, bbox, w, h))


# Level 2 as the upstream renders it: EPSG:4326 is 8x4 tiles, two 4x4
# metatiles side by side; EPSG:900913 4x4 tiles, one metatile.
REF = {
    "EPSG:4326": np.hstack([upstream("EPSG:4326", (-180, -90, 0, 90), 1024, 1024),
                            upstream("EPSG:4326", (0, -90, 180, 90), 1024, 1024)]),
    "EPSG:900913": upstream("EPSG:3857", (-WORLD_MERC, -WORLD_MERC, WORLD_MERC, WORLD_MERC), 1024, 1024),
}


def same(a, ref, what):
    """Pixel-identical: equal alpha everywhere, equal colour where visible
    (a fully transparent pixel has no colour). A client that reads no
    alpha (GDAL's TMS driver makes 3 bands) is compared on colour."""
    if not check(a.shape[:2] == ref.shape[:2], f"{what}: {a.shape[1]}x{a.shape[0]} px, upstream {ref.shape[1]}x{ref.shape[0]}"):
        return
    visible = ref[:, :, 3] > 0
    alpha_ok = a.shape[2] == 3 or np.array_equal(a[:, :, 3], ref[:, :, 3])
    rgb_ok = np.array_equal(a[:, :, :3][visible], ref[:, :, :3][visible])
    colours = len(np.unique(ref.reshape(-1, 4), axis=0))
    differ = int((a[:, :, :3] != ref[:, :, :3]).any(axis=2)[visible].sum())
    check(alpha_ok and rgb_ok, f"{what}: pixels equal the upstream's render ({colours} colours, "
                               f"{differ} visible pixels differ{', colour only' if a.shape[2] == 3 else ''})")


def gdal_level(ds, w, h):
    """The pixels of the dataset's overview (or full resolution) w x h."""
    b = ds.GetRasterBand(1)
    if (ds.RasterXSize, ds.RasterYSize) == (w, h):
        bands = [ds.GetRasterBand(i + 1) for i in range(ds.RasterCount)]
    else:
        k = [i for i in range(b.GetOverviewCount()) if (b.GetOverview(i).XSize, b.GetOverview(i).YSize) == (w, h)]
        assert k, f"no {w}x{h} level among the overviews"
        bands = [ds.GetRasterBand(i + 1).GetOverview(k[0]) for i in range(ds.RasterCount)]
    return np.dstack([band.ReadAsArray() for band in bands])


def read_twice(what, read, ref, tiles):
    """Reads with a client, compares, reads again: all hits, no bypass.
    read opens its dataset anew: GDAL keeps the blocks of an open one."""
    before = counters()
    a = read()
    d = delta(before)
    same(a, ref, what)
    check(d["passthrough"] == 0, f"{what}: first read, {d['passthrough']:.0f} requests passed the cache by")
    before = counters()
    read()
    d = delta(before)
    check(d["hits"] == tiles and d["misses"] == 0 and d["passthrough"] == 0,
          f"{what}: read again, {d['hits']:.0f} hits of {tiles} tiles, {d['misses']:.0f} misses, "
          f"{d['passthrough']:.0f} pass-throughs")


def gdal_open(name):
    ds = gdal.Open(name)
    check(ds is not None, f"GDAL opens {name[:120]}")
    return ds


# --- WMS-C 1.1.1: GDAL's tiled WMS, from the TILED=true capabilities ---
caps = f"WMS:{CADDY}/wms?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetCapabilities&TILED=true"
for srs, size in (("EPSG:4326", (2048, 1024)), ("EPSG:900913", (1024, 1024)), ("EPSG:3857", (1024, 1024))):
    meta = gdal_open(caps + f"&SRS={srs}").GetMetadata("SUBDATASETS")
    names = [v for k, v in meta.items() if k.endswith("_NAME") and f"LAYERS={LAYER}&" in v]
    if not check(len(names) == 1 and "TILED=true" in names[0] and f"SRS={srs}" in names[0],
                 f"WMS-C {srs}: GDAL finds the layer's tile set ({names})"):
        continue
    ref = REF["EPSG:4326" if srs == "EPSG:4326" else "EPSG:900913"]
    read_twice(f"GDAL WMS-C 1.1.1 {srs}", lambda: gdal_level(gdal_open(names[0] + "&TRANSPARENT=TRUE"), *size),
               ref, size[0] * size[1] // 65536)

# --- WMS-C 1.3.0: GDAL's tiled WMS speaking 1.3.0 (latitude first) ---
wms130 = (f"WMS:{CADDY}/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS={LAYER}&CRS=EPSG:4326"
          "&BBOXORDER=yxYX&BBOX=-90,-180,90,180&FORMAT=image/png&TRANSPARENT=TRUE&TILESIZE=256"
          "&OVERVIEWCOUNT=21&MINRESOLUTION=0.0000003352761269&TILED=true")
read_twice("GDAL WMS-C 1.3.0 EPSG:4326", lambda: gdal_level(gdal_open(wms130), 2048, 1024), REF["EPSG:4326"], 32)

# --- WMTS (REST, from the ResourceURL templates): GDAL ---
for ms, size, ref in (("EPSG:4326", (2048, 1024), "EPSG:4326"), ("EPSG:900913", (1024, 1024), "EPSG:900913"),
                      ("EPSG:3857", (1024, 1024), "EPSG:900913")):
    name = f"WMTS:{CADDY}/wmts?SERVICE=WMTS&REQUEST=GetCapabilities,layer={LAYER},tilematrixset={ms}"
    ds = gdal_open(name)
    gt = ds.GetGeoTransform()
    if ms == "EPSG:4326":
        check(gt[0] == -180 and gt[3] == 90 and abs(gt[0] + gt[1] * ds.RasterXSize - 180) < 1e-9
              and abs(gt[3] + gt[5] * ds.RasterYSize + 90) < 1e-9,
              f"GDAL WMTS {ms}: extent is the world, {gt}")
        check(ds.GetRasterBand(1).GetOverviewCount() + 1 == 22, f"GDAL WMTS {ms}: all 22 levels")
    else:
        # Levels past 22 would make the raster wider than GDAL's 2^31
        # pixel limit; GDAL stops there on its own.
        check(abs(gt[0] + 20037508.34) < 1e-6 and abs(gt[3] - 20037508.34) < 1e-6
              and abs(gt[0] + gt[1] * ds.RasterXSize - 20037508.34) < 1e-6,
              f"GDAL WMTS {ms}: extent ±20037508.34, {gt}")
        check(ds.GetRasterBand(1).GetOverviewCount() + 1 == 23 and ds.RasterXSize == 1 << 30,
              f"GDAL WMTS {ms}: levels 0-22, as many as a GDAL raster can hold ({ds.RasterXSize} px wide)")
    read_twice(f"GDAL WMTS {ms}", lambda: gdal_level(gdal_open(name), *size), REF[ref], size[0] * size[1] // 65536)

# --- TMS: GDAL, from the TileMapService listing ---
meta = gdal_open(f"{CADDY}/tms/1.0.0/").GetMetadata("SUBDATASETS")
tms = {v for k, v in meta.items() if k.endswith("_NAME") and v.endswith("@png")}
for gs, size in (("EPSG:4326", (2048, 1024)), ("EPSG:900913", (1024, 1024))):
    url = f"{CADDY}/tms/1.0.0/{LAYER}@{gs}@png"
    if check(url in tms, f"TMS listing names {url}"):
        read_twice(f"GDAL TMS {gs}", lambda: gdal_level(gdal_open(url), *size), REF[gs], size[0] * size[1] // 65536)

# --- XYZ: GDAL's TMS minidriver on the XYZ URL template ---
xyz = f"""<GDAL_WMS><Service name="TMS"><ServerUrl>{CADDY}/xyz/{LAYER}/EPSG:900913/${{z}}/${{x}}/${{y}}.png</ServerUrl></Service>
<DataWindow><UpperLeftX>-{WORLD_MERC}</UpperLeftX><UpperLeftY>{WORLD_MERC}</UpperLeftY>
<LowerRightX>{WORLD_MERC}</LowerRightX><LowerRightY>-{WORLD_MERC}</LowerRightY>
<TileLevel>2</TileLevel><TileCountX>1</TileCountX><TileCountY>1</TileCountY><YOrigin>top</YOrigin></DataWindow>
<Projection>EPSG:3857</Projection><BlockSizeX>256</BlockSizeX><BlockSizeY>256</BlockSizeY><BandsCount>4</BandsCount>
<Cache/></GDAL_WMS>""".replace("<Cache/>", "")
read_twice("GDAL XYZ EPSG:900913", lambda: gdal_level(gdal_open(xyz), 1024, 1024), REF["EPSG:900913"], 16)


# --- OWSLib: WMTS (KVP GetTile), TMS, WMS-C GetMap ---
def tile_of(ref, row, col):
    return ref[row * 256:(row + 1) * 256, col * 256:(col + 1) * 256]


def owslib_tiles(what, get, cells, ref):
    """Gets tiles with OWSLib twice: equal pixels, then all HIT."""
    for rnd in (1, 2):
        before = counters()
        for row, col in cells:
            r = get(row, col)
            hdr = r.info()  # case-insensitive
            if rnd == 1:
                same(decode(r.read()), tile_of(ref, row, col), f"{what} tile row {row} col {col}")
            else:
                check(hdr.get("geowebcache-cache-result") == "HIT", f"{what} tile row {row} col {col}: HIT on repeat "
                      f"({hdr.get('Cache-Status')})")
        d = delta(before)
        check(d["passthrough"] == 0, f"{what} round {rnd}: no pass-through ({d['passthrough']:.0f})")


wmts = WebMapTileService(f"{CADDY}/wmts")
check(LAYER in wmts.contents and {"EPSG:4326", "EPSG:900913", "EPSG:3857"} <= set(wmts.tilematrixsets),
      f"OWSLib WMTS: layer and matrix sets {sorted(wmts.tilematrixsets)}")
for op in wmts.operations:
    for m in op.methods:
        check(m["url"] == f"{CADDY}/wmts?", f"OWSLib WMTS: {op.name} at {m['url']}")
status, _, body = fetch(f"{CADDY}/wmts?SERVICE=WMTS&REQUEST=GetCapabilities")
check(status == 200 and b"<Capabilities" in body, "WMTS GetCapabilities KVP answers")
for ms, ref in (("EPSG:4326", "EPSG:4326"), ("EPSG:3857", "EPSG:900913")):
    owslib_tiles(f"OWSLib WMTS KVP {ms}", lambda row, col: wmts.gettile(
        layer=LAYER, tilematrixset=ms, tilematrix=f"{ms}:2", row=row, column=col, format="image/png"),
        [(0, 0), (1, 3), (3, 2)], REF[ref])
# Every REST template resolves for a tile of every linked matrix set.
layer = wmts.contents[LAYER]
for res in layer.resourceURLs:
    for ms in layer.tilematrixsetlinks:
        url = (res["template"].replace("{Style}", "default").replace("{TileMatrixSet}", ms)
               .replace("{TileMatrix}", f"{ms}:1").replace("{TileRow}", "0").replace("{TileCol}", "1"))
        status, hdr, _ = fetch(url)
        check(status == 200 and hdr["Content-Type"] == res["format"], f"WMTS template resolves: {url}")

tmsvc = TileMapService(f"{CADDY}/tms/1.0.0/")
for tm in tmsvc.items():
    status, _, _ = fetch(tm[0])
    check(status == 200, f"OWSLib TMS: TileMap {tm[0]} answers")
for gs, ref in (("EPSG:4326", "EPSG:4326"), ("EPSG:900913", "EPSG:900913")):
    rows = REF[ref].shape[0] // 256
    owslib_tiles(f"OWSLib TMS {gs}", lambda row, col: tmsvc.gettile(
        col, rows - 1 - row, 2, id=f"{CADDY}/tms/1.0.0/{LAYER}@{gs}@png"), [(0, 0), (1, 3), (3, 2)], REF[ref])

wms = WebMapService(f"{CADDY}/wms?TILED=true", version="1.1.1")
check(wms.getOperationByName("GetMap").methods[0]["url"] == f"{CADDY}/wms?",
      f"OWSLib WMS-C: GetMap at {wms.getOperationByName('GetMap').methods[0]['url']}")
check(LAYER in wms.contents, "OWSLib WMS-C: layer listed")
for srs, ref, origin, span in (("EPSG:4326", "EPSG:4326", (-180, 90), 45.0),
                               ("EPSG:3857", "EPSG:900913", (-WORLD_MERC, WORLD_MERC), WORLD_MERC / 2)):
    def get(row, col, srs=srs, origin=origin, span=span):
        x0, y1 = origin[0] + col * span, origin[1] - row * span
        # OWSLib adds BGCOLOR=0xFFFFFF, TRANSPARENT and EXCEPTIONS to every
        # GetMap: standard values that must not bypass the cache.
        return wms.getmap(layers=[LAYER], styles=[""], srs=srs, bbox=(x0, y1 - span, x0 + span, y1),
                          size=(256, 256), format="image/png", transparent=True)
    owslib_tiles(f"OWSLib WMS-C 1.1.1 {srs}", get, [(0, 0), (1, 3), (3, 2)], REF[ref])

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
