"""The tour notebooks pass nbval (strict: every output compared, after the
sanitizers of ``tests/nbval_sanitize.cfg``), each in under a minute on an idle
machine (the budget stretches with the load per core), in a kernel whose spec
this test installs itself (in a temporary JUPYTER_PATH). The same run's view
faces, as the kernel left them (``nbval_faces``), have the structure of the
committed ones (``view_faces``: elements, counts, words; not pixels): nbval
leaves out a live view's last face and a timeline's drawing.

One ``pytest --nbval`` subprocess per notebook, so a failure names it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from helpers import ROOT, load_factor, write_kernel_spec
from view_faces import differences

HERE = pathlib.Path(__file__).parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
KERNEL_NAME = "nbdist-test"
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
NOTEBOOK_BUDGET_S = 60.0  # on an idle machine; times load_factor() on a busy one
# Notebook 12 starts 32 workers (~80 s on two loaded cores): here it runs with 8
# (its NBDIST_TOUR_WORKERS), so its outputs are not the committed ones: nbval
# checks that every cell runs and compares its cells marked NBVAL_CHECK_OUTPUT.
SMALLER = {"12-32-workers-on-one-laptop": "8"}


@pytest.fixture(scope="session")
def kernel_env(tmp_path_factory):
    """An environment whose JUPYTER_PATH holds the ``nbdist-test`` kernel spec:
    this interpreter running ipykernel."""
    root = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(root, KERNEL_NAME)
    env = dict(os.environ)
    env["JUPYTER_PATH"] = os.pathsep.join(
        [str(root)] + ([env["JUPYTER_PATH"]] if env.get("JUPYTER_PATH") else [])
    )
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    # %tensorboard (notebook 07) runs the `tensorboard` script of this venv.
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return env


def test_every_notebook_is_tested():
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01-hello-distributed.ipynb",
        "02-cluster-and-placement.ipynb",
        "03-parameter-server-training.ipynb",
        "04-fault-tolerance.ipynb",
        "05-distribute-coordinator.ipynb",
        "06-collective-allreduce.ipynb",
        "07-tensorboard-and-live-curves.ipynb",
        "08-conv-net-across-workers.ipynb",
        "09-one-step-on-the-wire.ipynb",
        "10-stragglers-backup-workers-staleness.ipynb",
        "11-an-estimator-on-a-cluster.ipynb",
        "12-32-workers-on-one-laptop.ipynb",
        "13-a-language-model-across-workers.ipynb",
    ]


def test_notebooks_are_stored_with_outputs():
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(c["execution_count"] for c in code), f"{path.name} has unrun cells"
        assert any(c["outputs"] for c in code), f"{path.name} has no outputs"
        ignored = [c for c in code if "NBVAL_IGNORE_OUTPUT" in "".join(c["source"])]
        assert len(ignored) <= 1, f"{path.name}: too many unchecked cells"
        # An output with nothing to show (nbconvert warns of each; %%cluster's
        # live widget left one behind when it was emptied at the cell's end).
        empty = [i for i, c in enumerate(nb["cells"]) for o in c.get("outputs", ())
                 if o["output_type"] in ("display_data", "execute_result")
                 and not o.get("data")]
        assert not empty, f"{path.name}: empty outputs in cells {empty}"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_nbval(path, kernel_env, tmp_path):
    fresh = tmp_path / "fresh-outputs.json"
    env = dict(kernel_env, NBDIST_FRESH_OUTPUTS=str(fresh), PYTHONPATH=os.pathsep.join(
        [str(HERE)] + ([kernel_env["PYTHONPATH"]] if kernel_env.get("PYTHONPATH")
                       else [])))
    smaller = SMALLER.get(path.stem)
    if smaller:
        env["NBDIST_TOUR_WORKERS"] = smaller
    load = load_factor()
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            str(path.relative_to(ROOT)),
            f"--nbval-kernel-name={KERNEL_NAME}",
            f"--nbval-sanitize-with={SANITIZE}",
            "--nbval-cell-timeout=120",
            *(["--nbval-lax"] if smaller else []),
            "-p",
            "no:cacheprovider",
            "-p",
            "nbval_faces",
            "-q",
            "-o",
            "addopts=",
            "-W",
            "ignore::DeprecationWarning",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    budget = (NOTEBOOK_BUDGET_S + 15) * max(load, load_factor())
    assert seconds < budget, f"{path.name} took {seconds:.0f} s (budget {budget:.0f})"
    if smaller:
        return  # another size than the committed run: other faces
    committed = json.loads(path.read_text())["cells"]
    assert not differences(committed, json.loads(fresh.read_text())), (
        f"{path.name}: committed views differ from a fresh run "
        "(python -m nbdist.tour --only NN --inplace):\n"
        + "\n".join(differences(committed, json.loads(fresh.read_text()))))
