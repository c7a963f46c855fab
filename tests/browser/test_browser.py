"""A real browser: JupyterLab headless on 127.0.0.1, Debian's Chromium driven by
Playwright. Notebook 02 run top to bottom: the rendered ``ClusterView`` and
``PlacementView`` are found in the page (task rows, device names, one bar per
parameter server). An executed notebook (a ``%%cluster`` cell printing per
task, a kill and a restart, curves) reopened without a kernel, and converted
with ``nbconvert --to html``: both show what it saved.

Screenshots go to a temporary directory; ``NBDIST_UPDATE_SCREENSHOTS=1``
writes them to ``docs/screenshots/`` instead (to refresh the README's
pictures), so that a test run never rewrites tracked files.

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); skipped without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import nbformat
import pytest
from helpers import ROOT, free_port, wait_for, wait_gone

CHROMIUM = "/usr/bin/chromium"
DOC_SHOTS = ROOT / "docs" / "screenshots"
NOTEBOOK = "02-cluster-and-placement.ipynb"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _chromium(playwright, tmp_path):
    return playwright.chromium.launch_persistent_context(
        str(tmp_path / "chromium-profile"),
        executable_path=CHROMIUM,
        args=CHROMIUM_ARGS,
        headless=True,
        viewport={"width": 1280, "height": 1000},
    )


def lab_api(lab, path: str, method: str = "GET"):
    """JupyterLab's REST API at ``path`` (``/api/...``), its JSON answer."""
    request = urllib.request.Request(
        f"{lab['url']}{path}", method=method, data=b"" if method == "POST" else None,
        headers={"Authorization": f"token {lab['token']}"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        body = r.read()
    return json.loads(body) if body else None


def _one_idle_kernel(lab) -> bool:
    try:
        kernels = lab_api(lab, "/api/kernels")
    except urllib.error.HTTPError as e:
        # jupyter_server answers 500 while a kernel it lists is starting
        # (its last_activity not set yet): not settled.
        if e.code != 500:
            raise
        return False
    return len(kernels) == 1 and kernels[0]["execution_state"] == "idle"


def kernel_diagnosis(page, lab) -> str:
    """Where a Run All stands when it seems stuck: each code cell's prompt and
    the kernels' states; then the kernels are interrupted, so that a cell stuck
    in the kernel shows where (its traceback), returned here."""
    prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
    kernels = lab_api(lab, "/api/kernels")
    for k in kernels:
        lab_api(lab, f"/api/kernels/{k['id']}/interrupt", "POST")
    stderr = page.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    try:
        stderr.last.wait_for(timeout=20_000)
    except Exception:  # noqa: BLE001, S110 - playwright's TimeoutError: none ran
        pass
    errors = stderr.all_inner_texts()
    return (f"prompts {prompts}, kernels "
            f"{[(k['id'][:8], k['execution_state']) for k in kernels]}, "
            f"after an interrupt: {[e[-1500:] for e in errors]}")


def run_all(page, lab, name: str, workspace: str | None = None):
    """Opens notebook ``name`` in JupyterLab, waits for its kernel, then Run All.
    In a ``workspace`` of its own, only this notebook is open (in the default
    one, Lab reopens the notebooks opened before it)."""
    where = f"workspaces/{workspace}/tree" if workspace else "tree"
    page.goto(
        f"{lab['url']}/lab/{where}/{name}?token={lab['token']}",
        wait_until="domcontentloaded",
    )
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000
    )
    # Under load JupyterLab may start a second kernel while opening and shut
    # the first down mid-start: Run All once the server has one idle kernel.
    wait_for(lambda: _one_idle_kernel(lab), 90.0, "one idle kernel", interval=0.2)
    # Under load a click can land before the panel is active and run nothing:
    # Run All again (bounded) until the first code cell shows it was queued.
    first_prompt = page.locator(".jp-CodeCell .jp-InputArea-prompt").first
    for _ in range(3):
        page.locator(".jp-Notebook").first.click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.wait_for_function(
                "e => /\\[[*0-9]/.test(e.innerText)", arg=first_prompt.element_handle(),
                timeout=30_000)
            return
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: try again
            continue
    raise AssertionError(f"Run All never started {name}")


@pytest.fixture
def shots(tmp_path):
    """Where screenshots go: docs/screenshots/ only when asked."""
    if os.environ.get("NBDIST_UPDATE_SCREENSHOTS") == "1":
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        return DOC_SHOTS
    out = tmp_path / "screenshots"
    out.mkdir()
    return out


@contextlib.contextmanager
def running_lab(tmp_path):
    """JupyterLab on 127.0.0.1 serving a copy of notebooks/ under ``tmp_path``;
    stopped by PID when the block ends."""
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    port, token = free_port(), secrets.token_hex(16)
    # Every cell attached and rendered: by default (contentVisibility) the cells
    # out of view, such as the ClusterView's once Run All has scrolled to the
    # end, may be skipped by the browser, and their text read as empty.
    tracker = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    log = open(tmp_path / "lab.log", "w")  # noqa: SIM115 - open while the server runs
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.port_retries=0",
            "--LabApp.news_url=",
            "--LabApp.extension_manager=readonly",
            "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # on a loaded machine, a minute was short
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                raise RuntimeError(
                    "JupyterLab did not start:\n"
                    + (tmp_path / "lab.log").read_text()[-3000:]
                )
            time.sleep(0.2)
    info = {"url": url, "token": token, "pid": proc.pid, "log": tmp_path / "lab.log"}
    try:
        yield info
    finally:
        spawned = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
        left = wait_gone(spawned, 10, interval=0.1)
        for p in left:
            os.kill(p, signal.SIGKILL)
    assert not left, f"processes left after JupyterLab stopped: {left}"


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on 127.0.0.1 serving a copy of notebooks/; stopped by PID."""
    pytest.importorskip("jupyterlab")
    with running_lab(tmp_path) as info:
        yield info


@pytest.mark.timeout(300)
def test_notebook_02_in_jupyterlab_shows_cluster_and_placement_views(
    lab, tmp_path, shots
):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            run_all(page, lab, NOTEBOOK)

            # The ClusterView appears live, with a row per task.
            cluster = page.locator(".nbdist-cluster-view").first
            cluster.wait_for(timeout=150_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('.nbdist-cluster-view')]"
                ".some(e => /4 running|4 stopped/.test(e.innerText))",
                timeout=60_000,
            )
            cluster.scroll_into_view_if_needed()
            cluster.screenshot(path=str(shots / "cluster.png"))

            # Run all ends with `%cluster stop`: wait for its output.
            page.get_by_text("stopped 4 tasks").first.wait_for(timeout=120_000)
            text = cluster.inner_text()
            for task in ("worker:0", "worker:1", "ps:0", "ps:1"):
                assert task in text
            assert "localhost:" in text
            # The same widget went from running to stopped: it is live.
            page.wait_for_function(
                "() => /4 stopped/.test(document.querySelector("
                "'.nbdist-cluster-view').innerText)",
                timeout=30_000,
            )

            placement = page.locator(".jp-OutputArea-output:has(.nbdist-ps-bars)").first
            placement.wait_for(timeout=30_000)
            ptext = placement.inner_text()
            for device in (
                "/job:ps/replica:0/task:0/device:CPU:0",
                "/job:ps/replica:0/task:1/device:CPU:0",
                "/job:worker/replica:0/task:0/device:CPU:0",
            ):
                assert device in ptext
            bars = placement.locator(".nbdist-ps-bar")
            assert bars.count() == 2
            assert {bars.nth(i).get_attribute("data-task") for i in range(2)} == {
                "ps:0",
                "ps:1",
            }
            assert "hidden/weights" in ptext
            placement.scroll_into_view_if_needed()
            placement.screenshot(path=str(shots / "placement.png"))
            # No widget failed to render.
            assert page.get_by_text("Error displaying widget").count() == 0
        finally:
            context.close()
    assert (shots / "placement.png").stat().st_size > 10_000


SAVED_STATE_CELLS = [
    "import nbdist as nd\n%load_ext nbdist\n%cluster start --ps 1 --workers 2",
    (
        "%%cluster --tasks worker\n"
        "ctx = nd.distribute.get_current_worker_context()\n"
        "print(f'hello from {ctx.task_type}:{ctx.task_id}')"
    ),
    "%cluster kill worker:1",
    "%cluster restart worker:1",
    "%cluster status",
    textwrap.dedent("""\
        curves = nd.notebook.TrainingView(live=False)
        for step in range(20):
            curves.record("worker0", step, 2.0 / (1 + step))
        curves"""),
    "%cluster stop",
]


@pytest.fixture
def executed_notebook(tmp_path):
    """SAVED_STATE_CELLS run by nbclient (as ``python -m nbdist.tour`` runs the
    tour), widget state saved: (path, the notebook)."""
    from nbdist.tour import run_notebook

    src = tmp_path / "src"
    src.mkdir()
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in SAVED_STATE_CELLS],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}},
    )
    path = src / "saved-state.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "executed"
    out.mkdir()
    _, executed = run_notebook(path, out, progress=lambda line: None)
    return out / path.name, executed


def _visible_and_saved(text: str):
    for line in ("hello from worker:0", "hello from worker:1"):
        assert line in text, f"{line!r} not shown"
    assert "killed" in text, "no kill in the status history"


@pytest.mark.timeout(300)
def test_an_executed_notebook_reopened_without_a_kernel_shows_its_outputs(
    lab, tmp_path, shots, executed_notebook
):
    sync_api = pytest.importorskip("playwright.sync_api")
    path, _ = executed_notebook
    root = tmp_path / "notebooks"
    # No kernelspec: JupyterLab asks which kernel, and the test answers none.
    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("kernelspec", None)
    nbformat.write(nb, root / path.name)
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            page.goto(
                f"{lab['url']}/lab/tree/{path.name}?token={lab['token']}",
                wait_until="domcontentloaded",
            )
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            # The kernel dialog: dismissed, the notebook stays without a kernel.
            page.locator(".jp-Dialog").wait_for(timeout=60_000)
            page.keyboard.press("Escape")
            # The %%cluster cell: each task's printed line, from saved state.
            page.wait_for_function(
                "() => document.querySelector('.jp-Notebook').textContent"
                ".includes('hello from worker:1')",
                timeout=60_000,
            )
            _visible_and_saved(page.locator(".jp-Notebook").first.text_content())
            # The curves: a rendered PNG of the TrainingView.
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
                ".some(i => i.naturalWidth > 100)",
                timeout=60_000,
            )
            page.locator(".jp-Notebook").first.screenshot(
                path=str(shots / "saved-state.png")
            )
            assert page.get_by_text("Error displaying widget").count() == 0
        finally:
            context.close()


@pytest.mark.timeout(300)
def test_nbconvert_html_of_an_executed_notebook_shows_its_outputs(
    executed_notebook, tmp_path
):
    path, _ = executed_notebook
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir",
         str(out), str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (out / "saved-state.html").read_text()
    # What the page shows, not what its scripts carry (the widget state).
    shown = re.sub(r"(?s)<script\b.*?</script>", "", page)
    _visible_and_saved(shown)
    assert "data:image/png;base64," in shown, "no curves in the page"
