"""The tour notebooks as committed, exported by ``nbconvert --to html`` and
opened in Debian's Chromium with JavaScript disabled and no network: every
view shows its face (the cluster's tasks, the placement's devices, a barrier's
rounds, a timeline's SVG, the curves' image, each task's output of a
``%%cluster`` cell, TensorBoard's address), and nothing is left blank waiting
for a widget script. The notebooks save no widget state, and no nbdist view
leaves a widget in its outputs (JupyterLab would say "model not found" for it
once reopened). Tables keep the live views' look: left-aligned.

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); skipped without it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from helpers import ROOT
from test_browser import CHROMIUM, CHROMIUM_ARGS

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# Per notebook: (the cell's source, or a text only its source has; what its
# output must show): a regular expression of visible text, or "img" / "svg"
# for a visible picture.
FACES = {
    "01-hello-distributed": [
        ("%cluster local", r"Cluster · 1 task: 1 stopped"),
        ("%cluster local", r"localhost:0"),
        ("%cluster timeline z", r"Timeline · z · 8 ops on 1 task"),
        ("%cluster timeline z", "svg"),
        ("%cluster status", r"1 running"),
        # Each task's steps/s and CPU: measured numbers (or "–"), drawn.
        ("%cluster status", (r"steps/s\s+CPU\s+localhost:0\s+\S+\s+\d+\s+running\s+"
                             r"\d+\s+(\d+(\.\d)?|–)\s+(\d+%|–)")),
    ],
    "02-cluster-and-placement": [
        ("%cluster start", r"Cluster · 4 tasks: 4 stopped"),
        ("%cluster start", r"worker:0[\s\S]*worker:1[\s\S]*ps:0[\s\S]*ps:1"),
        ("%cluster placement", r"/job:ps/replica:0/task:1/device:CPU:0"),
        ("%cluster placement", r"hidden/weights"),
        ("balanced = nd.Graph()", r"/job:ps/replica:0/task:0/device:CPU:0"),
    ],
    "03-parameter-server-training": [
        ("%cluster start", r"Cluster · 3 tasks: 3 stopped"),
        ("curves = nd.notebook.TrainingView", "img"),
        ("print(f\"I am", r"I am worker:1, chief: False"),
        ("barriers = nd.notebook.BarrierView", r"\d+\s+rounds completed"),
        ("barriers = nd.notebook.BarrierView", r"arrived last"),
        ("SyncReplicasOptimizer", r"worker:1 done: the global step reached 50"),
        ("curves.sync()", "img"),
    ],
    "04-fault-tolerance": [
        ("%cluster start", r"Cluster · 3 tasks: 3 stopped"),
        ("%cluster start", r"killed · \d\d:\d\d:\d\d restarted"),
        ("%cluster start", r"Failure story"),
        ("%cluster start", "svg"),
        ('_ = story.wait_for(last_failure_has("redone"))\n%cluster status',
         r"2 running, 1 killed"),
        ('_ = story.wait_for(last_failure_has("redone"))\n%cluster status',
         r"re-queued \d+ closures?"),
        ("trainer.join(110)", r"Cluster · 3 tasks: 3 running"),
        ("trainer.join(110)", r"restored step \d+"),
        ("trainer.start()", r"training: 100%.*ps:0 lost, restored, \d+ steps? redone"),
        ("story", "svg"),
        ("story", r"detected after \d+\.\d s"),
        ("story", r"redone \d+ steps? in"),
    ],
    "05-distribute-coordinator": [
        ("%cluster start", r"Cluster · 4 tasks: 4 stopped"),
        ("print(ctx)", r"chief:0"),
        ("--tasks worker", r"ValueError: worker 1 refuses"),
        ("barriers = nd.notebook.BarrierView", r"rounds? completed"),
    ],
    "06-collective-allreduce": [
        ("%cluster start", r"Cluster · 4 tasks: 4 stopped"),
        ("MultiWorkerMirroredStrategy", r"worker:1"),
        ("MultiWorkerMirroredStrategy", r"fingerprint"),
        ("communication_hint=\"ring\"", r"received 32 MiB"),
        ("CollectiveView(ring_traces", r"reduce-scatter step 2"),
        ("CollectiveView(ring_traces", r"worker:2 → worker:0"),
        ("CollectiveView(ring_traces", "svg"),
    ],
    "07-tensorboard-and-live-curves": [
        ("%cluster start", r"Cluster · 3 tasks: 3 stopped"),
        ("curves = nd.notebook.TrainingView", "img"),
        ("FileWriter", r"worker:0 wrote 100 loss summaries"),
        ("curves.sync()", "img"),
        ("%tensorboard", r"TensorBoard at http://127\.0\.0\.1:\d+/"),
    ],
    "08-conv-net-across-workers": [
        ("%load_ext nbdist", r"Cluster · 4 tasks: 4 stopped"),
        ("nd.notebook.PlacementView", r"27 variables on 3 devices"),
        ("nd.notebook.PlacementView", "svg"),
        ("%%cluster", r"step +20 +loss"),
    ],
    "09-one-step-on-the-wire": [
        ("import json", r"Cluster · 3 tasks: 3 stopped"),
        ("ps_traffic = nd.notebook.TrafficView", r"ops on 3 tasks"),
        ("ps_traffic = nd.notebook.TrafficView", "svg"),
        ("ps_traffic.wait_for_steps(2)", r"Traffic · parameter servers · \d+ calls"),
        ("ps_traffic.wait_for_steps(2)", "svg"),
        ("ring_traffic.wait_for_steps(2)", r"RecvTensor|collective"),
        ("nd.notebook.TimelineView([allreduce_steps", r"collective"),
        ("nd.notebook.TimelineView([allreduce_steps", "svg"),
    ],
    "10-stragglers-backup-workers-staleness": [
        ("%cluster start", r"slowed worker:2 by 50 ms"),
        ("%cluster slow worker:2 50ms", r"slowed worker:2 by 50 ms"),
        ("stale = nd.notebook.StalenessView", "svg"),
        ("stale = nd.notebook.StalenessView", r"worker:2's gradients are the stalest: True"),
        ("no_backup = nd.notebook.BarrierView", r"straggler: worker:2"),
        ("no_backup = nd.notebook.BarrierView", r"per round \(red: arrived last"),
        ("nd.Session.reset(target)", r"stale gradients dropped"),
        ("made = sum(", r"worker:2's late gradients were dropped as stale: True"),
    ],
    "11-an-estimator-on-a-cluster": [
        ("import glob", r"Cluster · 5 tasks: 5 stopped"),
        ("import glob", r"chief:0[\s\S]*evaluator:0"),
        ("%%cluster --tasks chief worker evaluator", r"chief:0\s+is_chief=True"),
        ("# NBVAL_IGNORE_OUTPUT", "img"),
        ("export_dir = max(", r"outputs: \['classes', 'scores'\]"),
    ],
    "12-32-workers-on-one-laptop": [
        ("import os", r"Cluster · 33 tasks: 33 stopped"),
        ("run(n, sync=False)", r"Traffic · 32 workers, asynchronous · \d+ calls"),
        ("run(n, sync=False)", "svg"),
        ("run(n, sync=True)", r"32 gradients arrived over"),
        ("# NBVAL_CHECK_OUTPUT", r"ps:0 linked to every worker at every size: True"),
    ],
    "13-a-language-model-across-workers": [
        ("import os", r"Cluster · 3 tasks: 3 stopped"),
        ("model = lstm_lm.build", r"embedding\s+109×16\s+6976\s+/job:ps/task:0"),
        ("curves = nd.notebook.TrainingView", "img"),
        ("%%cluster", r"worker:1 done"),
        ("curves.sync()", "img"),
        ("traffic = nd.notebook.TrafficView", r"Traffic · one update of the embedding"),
        ("traffic = nd.notebook.TrafficView", "svg"),
        ("def nbytes(name)", r"worker:0 sent ps:0 the batch's rows, not the table: True"),
    ],
}


def test_every_tour_notebook_has_faces_to_check():
    assert [p.stem for p in NOTEBOOKS] == list(FACES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_saves_no_widget_state_and_views_leave_no_widget(path):
    nb = json.loads(path.read_text())
    assert WIDGET_STATE not in nb["metadata"].get("widgets", {})
    assert "widgets" not in nb["metadata"]
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            # Not even tqdm's progress bar (ProgressBarHook): its text stays.
            assert WIDGET_VIEW not in data, (
                f"{path.name}: a widget left in the outputs of "
                f"{''.join(cell['source'])[:60]!r}"
            )


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The committed tour notebooks as nbconvert's HTML: {stem: path}."""
    out = tmp_path_factory.mktemp("html")
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir",
         str(out), *map(str, NOTEBOOKS)],
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {p.stem: out / f"{p.stem}.html" for p in NOTEBOOKS}


@pytest.fixture(scope="module")
def offline_page():
    """A page of Debian's Chromium with JavaScript disabled, where only file:
    and data: URLs load (offline)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs Debian's chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            context = browser.new_context(
                java_script_enabled=False, viewport={"width": 1280, "height": 1000}
            )

            def offline(route):
                if route.request.url.startswith(("file:", "data:")):
                    route.continue_()
                else:
                    route.abort()

            context.route("**/*", offline)
            yield context.new_page()
        finally:
            browser.close()


def _code_cells(path) -> list[dict]:
    nb = json.loads(path.read_text())
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _shows(data: dict) -> bool:
    """Whether an output's data is something a page draws."""
    shown = ("text/html", "image/png", "image/svg+xml", "text/plain")
    return any(k in data for k in shown)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_views_show_their_faces_without_javascript(path, exported, offline_page):
    page = offline_page
    page.goto(exported[path.stem].as_uri(), wait_until="load")
    cells = _code_cells(path)
    rendered = page.locator(".jp-CodeCell")
    assert rendered.count() == len(cells)

    def output_of(source_part: str):
        sources = ["".join(c["source"]).strip() for c in cells]
        found = [i for i, s in enumerate(sources) if s == source_part] or [
            i for i, s in enumerate(sources) if source_part in s
        ]
        assert len(found) == 1, f"{len(found)} cells with {source_part!r}"
        return rendered.nth(found[0]).locator(".jp-OutputArea")

    # Every output that has something to show is drawn, and visibly.
    for k, cell in enumerate(cells):
        for n, out in enumerate(cell["outputs"]):
            if not _shows(out.get("data", {"text/plain": ""})):
                continue  # the emptied widget of a finished %%cluster cell
            area = rendered.nth(k).locator(".jp-OutputArea")
            assert area.is_visible(), f"{path.name}: cell {k} shows no output"
            box = area.bounding_box()
            assert box and box["height"] > 10, f"{path.name}: cell {k} is blank"

    for source_part, expect in FACES[path.stem]:
        area = output_of(source_part)
        if expect in ("img", "svg"):
            # Not a sparkline of a task's steps/s or CPU (ClusterView): a view's
            # picture.
            pictures = area.locator(
                f"xpath=.//*[local-name()='{expect}']"
                "[not(ancestor::*[contains(@class, 'nbdist-task-load')])]")
            assert pictures.count() >= 1, f"{path.name}: no {expect} for {source_part}"
            picture = pictures.first
            assert picture.is_visible()
            box = picture.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 20, box
        else:
            text = area.inner_text()
            assert re.search(expect, text), (
                f"{path.name}: {expect!r} not shown under {source_part!r}:\n"
                f"{text[:1500]}"
            )

    # No output waits for a widget script (which needs JavaScript and unpkg).
    assert page.locator(f"script[type='{WIDGET_VIEW}']").count() == 0
    assert page.get_by_text("Error displaying widget").count() == 0

    # Tables read as in the live views: left-aligned, not JupyterLab's default.
    for cell in page.locator(".nbdist td").all()[:20]:
        align = cell.evaluate("e => getComputedStyle(e).textAlign")
        assert align in ("left", "start"), align
