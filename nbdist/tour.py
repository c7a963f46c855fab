"""The guided tour, headless: ``python -m nbdist.tour``.

Executes the notebooks of ``notebooks/`` top to bottom in a fresh Jupyter
kernel each (with nbclient), against in-process and local multi-process
clusters, printing one line per cell (one notebook's at a time, in order,
however many run at once) and a summary with where the executed copies are.
To open them in JupyterLab instead (as the README says)::

    .venv/bin/pip install -q jupyterlab && .venv/bin/jupyter lab notebooks/

``--only 03`` runs the notebooks whose names contain 03; ``--jobs N`` runs N
at a time (default 2); ``--inplace`` writes the outputs back into
``notebooks/`` (what maintainers do after changing a notebook, so that nbval
compares against fresh outputs).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
CELL_TIMEOUT_S = 120
FREEZE_SOURCE = (
    "from nbdist.notebook.live_view import freeze_scrubbers as _freeze\n_ = _freeze()")
LAB_COMMAND = ".venv/bin/pip install -q jupyterlab && .venv/bin/jupyter lab notebooks/"


class InOrder:
    """Prints the lines of several notebooks run at once one notebook at a
    time, in the order given: the first's as they come, the others' held
    until every notebook before them has finished."""

    def __init__(self, names, write=print):
        self._order = list(names)
        self._held: dict = {name: [] for name in self._order}
        self._done: set = set()
        self._at = 0
        self._lock = threading.Lock()
        self._write = write

    def say(self, name: str, line: str) -> None:
        with self._lock:
            if self._order[self._at] == name:
                self._write(line)
            else:
                self._held[name].append(line)

    def finished(self, name: str) -> None:
        with self._lock:
            self._done.add(name)
            while self._at < len(self._order) and self._order[self._at] in self._done:
                self._at += 1
                if self._at < len(self._order):
                    for line in self._held.pop(self._order[self._at]):
                        self._write(line)


def _first_line(cell) -> str:
    for line in cell.source.splitlines():
        line = line.strip()
        if line and not line.startswith("# NBVAL"):
            return line if len(line) <= 60 else line[:57] + "..."
    return ""


def run_notebook(
    path: pathlib.Path,
    out_dir: pathlib.Path | None,
    kernel_name: str = "python3",
    progress=print,
) -> tuple[float, object]:
    """Executes one notebook (cell by cell, printing each); returns (seconds,
    the executed notebook), written to ``out_dir`` (or over ``path`` when
    ``out_dir`` is None)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
    )
    start = time.perf_counter()
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    target = path if out_dir is None else out_dir / path.name
    try:
        # The kernel's own stderr (its startup banner) is not part of the tour.
        with client.setup_kernel(stderr=subprocess.DEVNULL):
            for n, i in enumerate(code, 1):
                cell = nb.cells[i]
                t = time.perf_counter()
                client.execute_cell(cell, i)
                progress(
                    f"  [{n:2d}/{len(code)}] {time.perf_counter() - t:5.1f} s  "
                    f"{_first_line(cell)}"
                )
            # Views with sliders stayed live while the kernel ran: their static
            # faces go into their outputs now (a cell run and dropped).
            freeze = nbformat.v4.new_code_cell(FREEZE_SOURCE)
            nb.cells.append(freeze)
            try:
                client.execute_cell(freeze, len(nb.cells) - 1)
            finally:
                nb.cells.pop()
            # No widget state is saved (JupyterLab's default too): every view
            # leaves a static face in its outputs, which shows everywhere.
            nb.metadata.pop("widgets", None)
    finally:
        if out_dir is not None:  # a failed run is kept to look at, never in place
            nbformat.write(nb, target)
    if out_dir is None:
        nbformat.write(nb, target)
    return time.perf_counter() - start, nb


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m nbdist.tour", description="Runs the notebook tour headless."
    )
    p.add_argument("--only", default="", help="run notebooks whose name contains this")
    p.add_argument(
        "--inplace", action="store_true", help="write the outputs back into notebooks/"
    )
    p.add_argument("--out", default=None, help="where to write the executed copies")
    p.add_argument("--kernel", default="python3", help="kernel name (default python3)")
    p.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="notebooks run at once, each in its own kernel (default 2)",
    )
    args = p.parse_args(argv)
    paths = sorted(
        q for q in NOTEBOOKS.glob("[0-9][0-9]-*.ipynb") if args.only in q.name
    )
    if not paths:
        print(f"nbdist tour: no notebooks found in {NOTEBOOKS}", file=sys.stderr)
        return 1
    out_dir = None
    if not args.inplace:
        out_dir = pathlib.Path(args.out or tempfile.mkdtemp(prefix="nbdist-tour-"))
        out_dir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(args.jobs, len(paths)))
    print(
        f"nbdist tour: {len(paths)} notebooks, each in a fresh kernel, {jobs} at a "
        "time",
        flush=True,
    )
    printer = InOrder([q.stem for q in paths],
                      write=lambda line: print(line, flush=True))

    def one(path: pathlib.Path) -> tuple[str, str, bool]:
        name = path.stem
        try:
            return _one(path, name)
        finally:
            printer.finished(name)

    def _one(path: pathlib.Path, name: str) -> tuple[str, str, bool]:
        def say(line: str):
            printer.say(name, line)

        say(f"== {name}")
        try:
            seconds, _ = run_notebook(path, out_dir, args.kernel, progress=say)
            say(f"== {name}: done in {seconds:.1f} s")
            return path.name, f"ok   {seconds:5.1f} s", True
        except Exception as e:  # noqa: BLE001 - reported, the tour goes on
            if getattr(e, "ename", None):  # nbclient's CellExecutionError
                why = f"{e.ename}: {str(e.evalue).strip().splitlines()[0]}"
            else:
                lines = str(e).strip().splitlines()
                why = lines[-1] if lines else type(e).__name__
            say(f"== {name}: FAILED: {why}")
            return path.name, "FAILED: " + why, False

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        summary = list(pool.map(one, paths))
    print(f"\nSummary ({time.perf_counter() - start:.0f} s)")
    for name, status, _ in summary:
        print(f"  {name:<40} {status}")
    where = NOTEBOOKS if out_dir is None else out_dir
    print(f"\nExecuted notebooks: {where}")
    print(f"Open the tour in JupyterLab: {LAB_COMMAND}")
    return 0 if all(ok for _, _, ok in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
