"""The frameworks stay optional: the core, its CLI and its HTTP app import none of them."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("langgraph", "langchain_core", "langchain_tests")

# Run in a fresh interpreter (this session imported the frameworks already) with
# the frameworks hidden as if the extras were not installed: importing one
# raises ImportError, and nothing else may take their place in sys.modules.
PROBE = f"""
import sys
for name in {FRAMEWORKS!r}:
    sys.modules[name] = None
import oblivio, oblivio.cli, oblivio.http.app, oblivio.integrations
import oblivio.integrations.documents
from oblivio.cli import main
loaded = sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r} and sys.modules[m])
assert loaded == [], loaded
sys.argv = ['oblivio', '--help']
main()
"""


def test_core_cli_and_app_import_no_framework() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout
