"""``python -m nbdist.tour``'s output: one notebook's lines at a time (two run
at once printed their cells interleaved), and a closing line whose JupyterLab
command is the README's (it said ``jupyter lab``, which the tour's install
does not provide)."""

from __future__ import annotations

import re

from helpers import ROOT

from nbdist.tour import LAB_COMMAND, InOrder


def test_lines_of_notebooks_run_at_once_come_one_notebook_at_a_time():
    out: list[str] = []
    printer = InOrder(["01", "02", "03"], write=out.append)
    printer.say("02", "02 cell 1")  # 02 and 03 run while 01 does: held
    printer.say("01", "01 cell 1")
    printer.say("03", "03 cell 1")
    printer.say("02", "02 cell 2")
    printer.finished("02")  # finished before 01: still held
    printer.say("01", "01 cell 2")
    printer.finished("01")  # 02's lines, then 03's so far
    printer.say("03", "03 cell 2")  # 03's turn: printed as it comes
    printer.finished("03")
    assert out == ["01 cell 1", "01 cell 2", "02 cell 1", "02 cell 2", "03 cell 1",
                   "03 cell 2"]


def test_the_closing_lab_command_is_the_readmes():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert any(LAB_COMMAND in block for block in blocks)
    assert "jupyter lab notebooks/" in LAB_COMMAND and LAB_COMMAND.startswith(".venv/")


def test_the_tour_reads_as_one_story():
    """Each notebook's last words link to the next, the last to the first
    (05 ended "That is the tour.", 08 had no link on, 09 said the tour ended
    there, 10 linked back to 03); TensorBoard is loaded one way throughout
    (03 said ``%load_ext tensorboard``, 07 and the README ``%load_ext
    nbdist``)."""
    import json

    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    for i, path in enumerate(paths):
        cells = json.loads(path.read_text())["cells"]
        last = "".join([c for c in cells if c["cell_type"] == "markdown"][-1]["source"])
        following = paths[(i + 1) % len(paths)].name
        assert f"]({following})" in last, (path.name, last)
        text = "".join("".join(c["source"]) for c in cells)
        assert "%load_ext tensorboard" not in text, path.name
