"""A screenshot of a ClusterView's static HTML face (``_repr_html_``: what a
notebook shows once the view is frozen, and what nbconvert saves), rendered
by Debian's Chromium driven by Playwright (``tests/browser/test_browser.py``'s
browser, without JupyterLab). The page is set from a string: no network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from test_browser import _chromium

PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'></head>"
    "<body style='margin:0;padding:14px;background:#fff'>"
    "<div id='view' style='display:inline-block'>{html}</div></body></html>"
)


def screenshot_cluster_view(view, path: Path):
    """Writes ``view``'s HTML face, as Chromium draws it, to ``path`` (PNG)."""
    from playwright.sync_api import sync_playwright

    html = view._repr_html_()
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        browser = _chromium(p, Path(profile))
        try:
            page = browser.new_page()
            page.set_content(PAGE.format(html=html), wait_until="load")
            page.locator("#view").screenshot(path=str(path))
        finally:
            browser.close()
