"""Notebook 07 in JupyterLab started as the README says, with the venv's
``bin`` not on PATH: Run All shows TensorBoard's page in the frame of
``%tensorboard`` (TensorBoard still serving once every cell ran), and the
notebook saved with JupyterLab's default settings, reopened without a kernel,
shows every view's face and no "Error displaying widget".

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); skipped without it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import nbformat
import pytest
from test_browser import (
    CHROMIUM,
    _chromium,
    kernel_diagnosis,
    lab,  # noqa: F401 - a fixture
    run_all,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

NOTEBOOK = "07-tensorboard-and-live-curves.ipynb"


@pytest.fixture
def venv_not_on_path(monkeypatch):
    """JupyterLab (started after this fixture) and its kernels see a PATH
    without the venv's bin: ``.venv/bin/jupyter lab`` without activating it."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def _saved(path, timeout: float = 60.0) -> dict:
    """The notebook on disk once JupyterLab saved it after Run All."""
    deadline = time.monotonic() + timeout
    while True:
        nb = json.loads(path.read_text())
        outputs = json.dumps([c.get("outputs", []) for c in nb["cells"]])
        if "stopped 3 tasks" in outputs and "TensorBoard at" in outputs:
            return nb
        assert time.monotonic() < deadline, "JupyterLab did not save the run"
        time.sleep(0.2)  # the save is a request of the page: no event here


def _frame_diagnosis(page, tmp_path) -> str:
    """What the page holds when TensorBoard's frame shows no run: the frames,
    what TensorBoard answers when asked directly, and a screenshot's path."""
    frames = page.locator("iframe.nbdist-tensorboard")
    srcs = [frames.nth(i).get_attribute("src") for i in range(frames.count())]
    loaded = [(f.url, f.is_detached()) for f in page.frames]
    answers = []
    for src in srcs:
        started = time.monotonic()
        try:
            with urllib.request.urlopen(src, timeout=30) as r:
                answers.append(f"{src} -> {r.status} in {time.monotonic() - started:.1f} s")
        except OSError as e:
            answers.append(f"{src} -> {e!r}")
    try:
        shown = repr(
            page.frame_locator("iframe.nbdist-tensorboard").first.locator("body")
            .inner_text(timeout=5_000)[:1000]
        )
    except Exception as e:  # noqa: BLE001 - playwright's TimeoutError, reported
        shown = f"no body ({type(e).__name__})"
    shot = tmp_path / "tensorboard-frame.png"
    page.screenshot(path=str(shot), full_page=True)
    return f"frame text {shown}, iframes {srcs}, page frames {loaded}, asked directly {answers}, screenshot {shot}"


@pytest.mark.timeout(420)
def test_run_all_shows_tensorboard_and_the_saved_notebook_reopens_static(
    venv_not_on_path,
    lab,  # noqa: F811 - the fixture
    tmp_path,
):
    sync_api = pytest.importorskip("playwright.sync_api")
    root = tmp_path / "notebooks"
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            run_all(page, lab, NOTEBOOK)
            try:
                page.get_by_text("stopped 3 tasks").first.wait_for(timeout=180_000)
            except sync_api.TimeoutError:
                raise AssertionError(
                    "Run All did not reach the last cell: " + kernel_diagnosis(page, lab)
                ) from None
            # The frame: TensorBoard's own page, with the runs of the logdir,
            # after the last cell ran (nothing stopped TensorBoard).
            frame = page.frame_locator("iframe.nbdist-tensorboard")
            try:
                frame.get_by_text("worker0").first.wait_for(timeout=150_000)
            except sync_api.TimeoutError:
                raise AssertionError(
                    "TensorBoard's frame shows no run 'worker0': "
                    + _frame_diagnosis(page, tmp_path)
                ) from None
            assert page.get_by_text("Failed to launch TensorBoard").count() == 0

            page.locator(".jp-Notebook").first.click()
            page.keyboard.press("Control+s")
            saved = _saved(root / NOTEBOOK)
            assert "widgets" not in saved["metadata"]
            for cell in saved["cells"]:
                for out in cell.get("outputs", []):
                    data = out.get("data", {})
                    assert "application/vnd.jupyter.widget-view+json" not in data

            # Reopened without a kernel: every face from the saved outputs.
            saved["metadata"].pop("kernelspec", None)
            nbformat.write(nbformat.from_dict(saved), root / "reopened.ipynb")
            page.goto(
                f"{lab['url']}/lab/tree/reopened.ipynb?token={lab['token']}",
                wait_until="domcontentloaded",
            )
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            # JupyterLab may ask for a kernel (answered: none) or pick one; the
            # saved outputs show either way.
            try:
                page.locator(".jp-Dialog").wait_for(timeout=15_000)
                page.keyboard.press("Escape")
            except sync_api.TimeoutError:
                pass
            page.wait_for_function(
                "() => document.querySelector('.jp-Notebook').textContent"
                ".includes('worker:0 wrote 100 loss summaries')",
                timeout=60_000,
            )
            text = page.locator(".jp-Notebook").first.text_content()
            assert "Cluster · 3 tasks: 3 stopped" in text
            assert "TensorBoard at http://127.0.0.1:" in text
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
                ".filter(i => i.naturalWidth > 100).length >= 2",
                timeout=60_000,
            )
            assert page.get_by_text("Error displaying widget").count() == 0
            # The cluster's table as live: left-aligned.
            align = page.locator(".nbdist-cluster-view td").first.evaluate(
                "e => getComputedStyle(e).textAlign"
            )
            assert align in ("left", "start"), align
        finally:
            context.close()
