"""The console is offline: its pages refer only to assets this package ships."""

from __future__ import annotations

import re

from oblivio.console.web import HERE, STATIC_DIR

REFERENCE = re.compile(r"""(?:src|href|action)="([^"{]+)""")


def test_templates_refer_to_nothing_outside_the_console() -> None:
    for template in sorted((HERE / "templates").glob("*.html")):
        for target in REFERENCE.findall(template.read_text(encoding="utf-8")):
            assert target.startswith("/"), (template.name, target)
            assert not target.startswith("//"), (template.name, target)
            if target.startswith("/console/static/"):
                assert (STATIC_DIR / target.removeprefix("/console/static/")).is_file(), target


def test_scripts_fetch_only_same_origin_paths() -> None:
    for script in sorted(STATIC_DIR.glob("*.js")):
        text = script.read_text(encoding="utf-8")
        assert not re.search(r"https?://", text), script.name
        for target in re.findall(r"fetch\(([^,)]+)", text):
            assert target.startswith(('"/', "container.dataset.url")), (script.name, target)
