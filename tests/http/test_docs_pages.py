"""``/docs`` and ``/redoc`` load their scripts and styles from this server, not a CDN."""

from __future__ import annotations

import re

from tests.http.conftest import World


def test_the_documentation_pages_work_offline(sqlite_world: World) -> None:
    client = sqlite_world.client
    for page, wanted in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        html = client.get(page)
        assert html.status_code == 200
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html.text)
        assets += re.findall(r"""url: ?['"]([^'"]+)['"]""", html.text)
        assert any(a.endswith(wanted) for a in assets), assets
        assert not re.search(r"https?://", html.text), f"{page} loads something remote"
        for asset in assets:
            if asset.endswith((".js", ".css", ".png")):
                served = client.get(asset)
                assert served.status_code == 200, asset
                assert len(served.content) > 100, asset
