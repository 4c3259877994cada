"""What both client scripts share: checks that print a line each, and the
cache's counters read from Caddy's Prometheus endpoint."""

import os
import re
import urllib.parse
import urllib.request

LAYER = "test:polygons"
WORLD_MERC = 20037508.342789244
failures = []
# Bounds for a hung request only, never a speed (caddytest/clients_test.go
# sets them: the suite must pass on a machine whose every core is busy).
REQUEST_TIMEOUT = int(os.environ.get("TILECACHE_CLIENT_REQUEST_TIMEOUT", "300"))
DRAW_TIMEOUT = int(os.environ.get("TILECACHE_CLIENT_DRAW_TIMEOUT", "600"))


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def fetch(url):
    with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT) as r:
        return r.status, dict(r.headers), r.read()


class Counters:
    """The cache's hit, miss and pass-through counters, summed, at METRICS."""

    def __init__(self, metrics):
        self.metrics = metrics

    def now(self):
        _, _, body = fetch(self.metrics)
        out = {"hits": 0.0, "misses": 0.0, "passthrough": 0.0}
        for line in body.decode().splitlines():
            m = re.match(r"caddy_tile_cache_(hits|misses|passthrough)_total(\{[^}]*\})? ([0-9.e+]+)$", line)
            if m:
                out[m.group(1)] += float(m.group(3))
        return out

    def delta(self, before):
        now = self.now()
        return {k: now[k] - before[k] for k in now}


def upstream_png(upstream, srs, bbox, w, h):
    """The upstream's own PNG render of one metatile, as the cache asks for it."""
    q = urllib.parse.urlencode({"SERVICE": "WMS", "VERSION": "1.1.1", "REQUEST": "GetMap", "LAYERS": LAYER,
                                "STYLES": "", "SRS": srs, "BBOX": ",".join(repr(v) for v in bbox),
                                "WIDTH": w, "HEIGHT": h, "FORMAT": "image/png", "TRANSPARENT": "TRUE"})
    status, hdr, body = fetch(upstream + "?" + q)
    assert status == 200 and hdr.get("Content-Type", "").startswith("image/png"), (status, hdr)
    return body
