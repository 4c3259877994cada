#!/usr/bin/python3
"""QGIS opens an exported file and draws it; the drawing must be the
cache's tiles. Arguments: the file (MBTiles or GeoPackage), its CRS, the
extent to draw (JSON [minx, miny, maxx, maxy]), the size (JSON [w, h]) and
a PNG of what the cache's tiles of that extent make. Prints one line per
check; exits 1 if any failed."""

import json
import sys

import numpy as np
from osgeo import gdal

import qgisdraw
from checks import check, failures

path, crs, extent, size, expected = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
out, a = qgisdraw.qgis_draws(path, crs, extent, size, "gdal")
check(out.get("valid"), f"QGIS opens {path}: {out.get('errors')}")
check(not out.get("errors"), f"QGIS draws it without errors: {out.get('errors')}")
check(out.get("crs") == crs, f"QGIS sees it in {crs}: {out.get('crs')}")
if a is not None:
    ds = gdal.Open(expected)
    want = np.dstack([ds.GetRasterBand(i + 1).ReadAsArray() for i in range(ds.RasterCount)])
    got = a[:, :, :want.shape[2]].astype(int)
    if check(got.shape == want.shape, f"the drawing is {got.shape}, the tiles {want.shape}"):
        diff = np.abs(got - want.astype(int))
        check(diff.mean() < 1.0 and (diff > 8).mean() < 0.01,
              f"QGIS's drawing is the cache's tiles: mean difference {diff.mean():.3f}, {(diff > 8).mean() * 100:.2f} % of values off by more than 8")
else:
    check(False, "QGIS drew nothing")
sys.exit(1 if failures else 0)
