#!/usr/bin/python3
"""QGIS drawing a layer in a child process, for qgis_clients.py and
formats.py: a fresh QGIS per drawing (fresh network and tile caches, an
empty HOME), bounded by DRAW_TIMEOUT, its requests by REQUEST_TIMEOUT.

    qgisdraw.py --draw URI CRS EXTENT_JSON SIZE_JSON [PROVIDER]

PROVIDER is QGIS's data provider: "wms" (the default: WMS, WMTS, XYZ) or
"gdal" (a file: an MBTiles or a GeoPackage).
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from checks import DRAW_TIMEOUT, REQUEST_TIMEOUT


def draw(uri, crs, extent, size, provider="wms"):
    """Child process: QGIS draws the layer uri into an extent; prints the
    pixels (RGBA, as a .npy file path) and QGIS's errors as JSON."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from qgis.core import (QgsApplication, QgsCoordinateReferenceSystem, QgsMapRendererSequentialJob,
                           QgsMapSettings, QgsNetworkAccessManager, QgsRasterLayer, QgsRectangle)
    from qgis.PyQt.QtCore import QSize
    from qgis.PyQt.QtGui import QColor, QImage

    QgsApplication.setPrefixPath("/usr", True)
    app = QgsApplication([], False)
    app.initQgis()
    QgsNetworkAccessManager.setTimeout(REQUEST_TIMEOUT * 1000)  # QGIS's own default: 60 s
    out = {"valid": False, "errors": []}
    layer = QgsRasterLayer(uri, "layer", provider)
    if layer.isValid():
        out["valid"] = True
        out["crs"] = layer.crs().authid()
        settings = QgsMapSettings()
        settings.setLayers([layer])
        settings.setDestinationCrs(QgsCoordinateReferenceSystem(crs))
        settings.setExtent(QgsRectangle(*extent))
        settings.setOutputSize(QSize(*size))
        settings.setOutputDpi(96)
        settings.setBackgroundColor(QColor(0, 0, 0, 0))
        job = QgsMapRendererSequentialJob(settings)
        job.start()
        job.waitForFinished()
        out["errors"] = [e.message for e in job.errors()]
        img = job.renderedImage().convertToFormat(QImage.Format_RGBA8888)
        bits = img.constBits()
        bits.setsize(img.sizeInBytes())
        a = np.frombuffer(bits, np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)[:, :img.width()]
        path = os.path.join(os.environ["HOME"], "drawn.npy")
        np.save(path, a)
        out["pixels"] = path
    else:
        out["errors"] = [layer.error().summary()]
    print(json.dumps(out), flush=True)
    if provider == "gdal":
        # QGIS 3.22 (Debian 12) crashes in exitQgis once its GDAL provider
        # has drawn (SIGSEGV, or "double free" and SIGABRT), after all is
        # done: the child ends here instead; nothing is left to save.
        sys.stdout.flush()
        os._exit(0)
    app.exitQgis()


def qgis_draws(uri, crs, extent, size, provider="wms"):
    """QGIS draws uri into extent (in crs) at size in a child process;
    returns its report and the pixels (RGBA rows), None when it drew nothing."""
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home, XDG_RUNTIME_DIR=home)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--draw", uri, crs, json.dumps(extent), json.dumps(size), provider],
                           env=env, capture_output=True, text=True, timeout=DRAW_TIMEOUT)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            return {"valid": False, "errors": [f"exit {p.returncode}: {p.stderr[-500:]}"]}, None
        out = json.loads(lines[-1])
        return out, (np.load(out["pixels"]) if "pixels" in out else None)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--draw":
    draw(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5]), *sys.argv[6:7])
