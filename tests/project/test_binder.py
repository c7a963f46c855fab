"""binder/ makes the tour run on Binder: proved here by building a fresh venv
the way Binder does (``pip install -r binder/requirements.txt``, then
``binder/postBuild`` from the repository's root) and running every notebook
in a kernel of that venv with nbclient."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time

import pytest
from helpers import ROOT, write_kernel_spec

BINDER = ROOT / "binder"


def test_binder_files():
    reqs = (BINDER / "requirements.txt").read_text()
    assert re.search(r"^ipywidgets>=8", reqs, re.MULTILINE)
    post = BINDER / "postBuild"
    assert post.stat().st_mode & stat.S_IXUSR
    assert "pip install" in post.read_text() and " -e ." in post.read_text()


def test_readme_has_a_binder_badge_to_the_tour():
    readme = (ROOT / "README.md").read_text()
    m = re.search(
        r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]"
        r"\((https://mybinder\.org/v2/gh/[^)]+)\)",
        readme,
    )
    assert m, "no Binder badge in the README"
    assert "labpath=notebooks" in m.group(1)


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_notebooks_run_in_an_environment_built_like_binder(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    venv = tmp_path / "binder-env"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    bin_dir = venv / "bin"
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(venv),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    env.pop("PYTHONPATH", None)
    _run(
        [str(bin_dir / "pip"), "install", "-q", "-r", str(BINDER / "requirements.txt")],
        env=env,
        timeout=900,
    )
    _run(["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env, timeout=900)
    python = str(bin_dir / "python")
    _run([python, "-c", "import nbdist, ipywidgets, matplotlib"], env=env, timeout=120)

    write_kernel_spec(tmp_path / "jupyter", "binder", python, display_name="binder")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        start = time.monotonic()
        NotebookClient(
            nb,
            kernel_name="binder",
            timeout=180,
            resources={"metadata": {"path": str(path.parent)}},
        ).execute(env=env)
        seconds = time.monotonic() - start
        errors = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "error"
        ]
        assert not errors, (path.name, errors[0].ename, errors[0].evalue)
        assert seconds < 90, f"{path.name} took {seconds:.0f} s in the Binder env"
