"""Writes the QGIS Server project of the synthetic world.

Usage (Debian's Python, with python3-qgis):
    QT_QPA_PLATFORM=offscreen /usr/bin/python3 upstream/qgis/project.py DATA_DIR OUT.qgs

DATA_DIR is what upstream/generate.sh made for MapServer (polygons, roads,
places Shapefiles and relief.tif, all EPSG:4326): both upstreams render the
same features. The layers get the WMS names MapServer's have (test:polygons,
test:roads, test:places, test:relief) so that one cache configuration and one
test suite serve both; the styles follow the mapfile's colours, but this is
QGIS's own rendering (antialiased, its own label engine), not a copy of
MapServer's pixels.
"""

import sys

from qgis.core import (
    QgsApplication,
    QgsCoordinateReferenceSystem,
    QgsFillSymbol,
    QgsGraduatedSymbolRenderer,
    QgsLineSymbol,
    QgsMarkerSymbol,
    QgsPalLayerSettings,
    QgsProject,
    QgsRasterLayer,
    QgsRendererCategory,
    QgsCategorizedSymbolRenderer,
    QgsRendererRange,
    QgsRuleBasedLabeling,
    QgsRuleBasedRenderer,
    QgsSingleSymbolRenderer,
    QgsTextBufferSettings,
    QgsTextFormat,
    QgsUnitTypes,
    QgsVectorLayer,
    QgsVectorLayerSimpleLabeling,
)
from qgis.PyQt.QtGui import QColor, QFont


def rgb(r, g, b):
    return QColor(r, g, b)


def polygons(data):
    layer = QgsVectorLayer(f"{data}/polygons.shp", "test:polygons", "ogr")
    assert layer.isValid(), "polygons.shp did not load"
    # Style "default": plain fill and outline, as the mapfile's class group.
    plain = QgsFillSymbol.createSimple({
        "color": "236,229,206", "outline_color": "150,138,112",
        "outline_width": "0.26", "outline_width_unit": "MM",
    })
    layer.setRenderer(QgsSingleSymbolRenderer(plain))
    sm = layer.styleManager()
    # The style a project starts with is called "default" already; the
    # second one, "population", is the mapfile's choropleth.
    sm.addStyleFromLayer("population")
    sm.setCurrentStyle("population")
    classes = [
        (0, 100000, "< 100 thousand", (255, 255, 204)),
        (100000, 1000000, "100 thousand - 1 million", (254, 217, 118)),
        (1000000, 10000000, "1 - 10 million", (253, 141, 60)),
        (10000000, 100000000, "10 - 100 million", (227, 26, 28)),
        (100000000, 10**13, ">= 100 million", (128, 0, 38)),
    ]
    ranges = []
    for lo, hi, label, (r, g, b) in classes:
        sym = QgsFillSymbol.createSimple({
            "color": f"{r},{g},{b}", "outline_color": "110,110,110",
            "outline_width": "0.2", "outline_width_unit": "MM",
        })
        ranges.append(QgsRendererRange(lo, hi - 0.5, sym, label))
    layer.setRenderer(QgsGraduatedSymbolRenderer("population", ranges))
    sm.setCurrentStyle("default")
    return layer


def roads(data):
    layer = QgsVectorLayer(f"{data}/roads.shp", "test:roads", "ogr")
    assert layer.isValid(), "roads.shp did not load"

    def line(*parts):
        sym = QgsLineSymbol.createSimple({"line_color": parts[0][0], "line_width": parts[0][1], "line_width_unit": "Pixel"})
        for color, width in parts[1:]:
            extra = QgsLineSymbol.createSimple({"line_color": color, "line_width": width, "line_width_unit": "Pixel"})
            sym.appendSymbolLayer(extra.symbolLayer(0).clone())
        return sym

    track = line(("130,100,70", "0.8"))
    track.symbolLayer(0).setUseCustomDashPattern(True)
    track.symbolLayer(0).setCustomDashVector([4, 3])
    track.symbolLayer(0).setCustomDashPatternUnit(QgsUnitTypes.RenderPixels)
    cats = [
        QgsRendererCategory("motorway", line(("120,60,0", "3.5"), ("240,140,40", "2.2")), "Motorway"),
        QgsRendererCategory("primary", line(("200,160,30", "1.8")), "Primary"),
        QgsRendererCategory("secondary", line(("110,110,110", "1.2")), "Secondary"),
        QgsRendererCategory("track", track, "Track"),
    ]
    layer.setRenderer(QgsCategorizedSymbolRenderer("kind", cats))
    return layer


def label_settings(bold, size, color):
    fmt = QgsTextFormat()
    font = QFont("DejaVu Sans")
    font.setBold(bold)
    fmt.setFont(font)
    fmt.setSize(size)
    fmt.setSizeUnit(QgsUnitTypes.RenderPoints)
    fmt.setColor(color)
    buf = QgsTextBufferSettings()
    buf.setEnabled(True)
    buf.setSize(1)
    buf.setSizeUnit(QgsUnitTypes.RenderPixels)
    buf.setColor(QColor(255, 255, 255))
    fmt.setBuffer(buf)
    s = QgsPalLayerSettings()
    s.fieldName = "name"
    s.enabled = True
    s.setFormat(fmt)
    # One position, right of the point, and every label drawn even where
    # labels overlap. QGIS's label engine otherwise picks among candidate
    # positions and drops colliding labels differently from one render of
    # the same map to the next (seen with QGIS 3.22: 4,530 pixels of a
    # 512x512 render moved), and a tile cache needs the same label in the
    # same place in every metatile that shows it.
    s.placement = QgsPalLayerSettings.OverPoint
    s.quadOffset = QgsPalLayerSettings.QuadrantRight
    s.xOffset = 1.5
    s.offsetUnits = QgsUnitTypes.RenderMillimeters
    s.displayAll = True
    return s


def places(data):
    layer = QgsVectorLayer(f"{data}/places.shp", "test:places", "ogr")
    assert layer.isValid(), "places.shp did not load"
    city = QgsMarkerSymbol.createSimple({
        "name": "circle", "color": "180,0,0", "outline_color": "255,255,255",
        "size": "7", "size_unit": "Pixel", "outline_width": "1", "outline_width_unit": "Pixel",
    })
    town = QgsMarkerSymbol.createSimple({
        "name": "circle", "color": "40,40,40", "outline_style": "no",
        "size": "4", "size_unit": "Pixel",
    })
    root = QgsRuleBasedRenderer.Rule(None)
    root.appendChild(QgsRuleBasedRenderer.Rule(city, 0, 0, '"population" >= 1000000', "City"))
    root.appendChild(QgsRuleBasedRenderer.Rule(town, 0, 0, '"population" < 1000000', "Town"))
    layer.setRenderer(QgsRuleBasedRenderer(root))
    # Labels from "name", bold for cities, as the mapfile has them.
    root = QgsRuleBasedLabeling.Rule(None)
    r = QgsRuleBasedLabeling.Rule(label_settings(True, 9, rgb(20, 20, 20)))
    r.setFilterExpression('"population" >= 1000000')
    root.appendChild(r)
    r = QgsRuleBasedLabeling.Rule(label_settings(False, 7, rgb(40, 40, 40)))
    r.setFilterExpression('"population" < 1000000')
    root.appendChild(r)
    layer.setLabeling(QgsRuleBasedLabeling(root))
    layer.setLabelsEnabled(True)
    return layer


def relief(data):
    layer = QgsRasterLayer(f"{data}/relief.tif", "test:relief", "gdal")
    assert layer.isValid(), "relief.tif did not load"
    layer.resampleFilter().setZoomedInResampler(None)
    return layer


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: project.py DATA_DIR OUT.qgs")
    data, out = sys.argv[1], sys.argv[2]
    app = QgsApplication([], False)
    app.initQgis()
    try:
        p = QgsProject.instance()
        p.setCrs(QgsCoordinateReferenceSystem("EPSG:4326"))
        p.setTitle("tilecache synthetic world")
        for layer in (relief(data), polygons(data), roads(data), places(data)):
            p.addMapLayer(layer)
        # Drawing order: the relief at the bottom, places on top (the layer
        # tree lists top first).
        root = p.layerTreeRoot()
        order = ["test:places", "test:roads", "test:polygons", "test:relief"]
        root.setHasCustomLayerOrder(True)
        root.setCustomLayerOrder([p.mapLayersByName(n)[0] for n in order])
        p.writeEntry("WMSServiceCapabilities", "/", True)
        p.writeEntry("WMSServiceTitle", "/", "tilecache synthetic world")
        p.writeEntry("WMSServiceAbstract", "/", "Synthetic regions, roads and places (upstream/gendata)")
        # The CRSs the layers are offered in. EPSG:900913 is not on the
        # list: the cache asks for spherical Mercator as EPSG:3857.
        p.writeEntry("WMSCrsList", "/", ["EPSG:4326", "EPSG:3857"])
        p.writeEntry("WMSRestrictedComposers", "/", [])
        p.writeEntry("WMSMaxWidth", "/", "4096")
        p.writeEntry("WMSMaxHeight", "/", "4096")
        # No WMSUrl: QGIS Server builds the URLs in its capabilities from
        # each request (Host, X-Forwarded-Host, X-Qgis-Service-Url...),
        # as it must behind the cache.
        p.writeEntry("WMSExtent", "/", ["-180", "-85", "180", "85"])
        if not p.write(out):
            sys.exit(f"project.py: writing {out} failed: {p.error()}")
    finally:
        app.exitQgis()


main()
