"""Errors people can act on: an op remembers where user code built it; a
Session's error names that place (and, when the graph was rejected, the way out);
in IPython an ``OpError`` is a few lines naming the cell, with ``%tb`` for the
full traceback; and a notebook, executed by nbclient in a real kernel, keeps all
of that in its saved outputs.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from test_magics import _notebook, _text

import nbdist as nd
from nbdist.framework import op_site

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _line_of(text: str, source) -> int:
    lines, first = inspect.getsourcelines(source)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_an_op_records_the_user_line_that_built_it():
    this = test_an_op_records_the_user_line_that_built_it
    g = nd.Graph()
    with g.as_default():
        a = nd.constant([1.0, 2.0], name="a")
        v = nd.Variable(a * 2.0, name="v")  # several ops, built inside nbdist
    a_line = _line_of('name="a"', this)
    assert a.op.traceback == [
        (__file__, a_line, this.__name__, 'a = nd.constant([1.0, 2.0], name="a")')
    ]
    assert {op.traceback[0][:3] for op in g.get_operations() if op is not a.op} == {
        (__file__, a_line + 1, this.__name__)
    }
    assert v.op.traceback[0][3].startswith("v = nd.Variable(")
    imported = nd.Graph()
    with imported.as_default():
        nd.import_graph_def(g.as_graph_def(), name="")
    line = _line_of("nd.import_graph_def(", this)
    assert {op.traceback[0][1] for op in imported.get_operations()} == {line}


def test_an_op_on_a_missing_job_names_its_site_and_way_out():
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:nosuchjob/task:0"):
            bad = nd.constant(1.0, name="bad") + 1.0
        good = nd.constant(3.0) * 2.0
    line = _line_of(
        'name="bad"', test_an_op_on_a_missing_job_names_its_site_and_way_out
    )
    with nd.Session(graph=g) as sess:
        for fetch in (bad, good):  # a later run of the same graph fails the same way
            with pytest.raises(nd.errors.InvalidArgumentError) as e:
                sess.run(fetch)
            assert e.value.op.name == "bad"  # as TF: the Operation
            text = str(e.value)
            assert text.startswith("Cannot assign a device for operation bad: ")
            assert (
                f"Original stack trace for 'bad':\n  File \"{__file__}\", line "
                f'{line}\n    bad = nd.constant(1.0, name="bad") + 1.0'
            ) in text
            assert "start over with nd.reset_default_graph()" in text
            assert "fresh nd.Graph()" in text
            assert text.count("Original stack trace") == 1
    fresh = nd.Graph()
    with fresh.as_default():
        good = nd.constant(3.0) * 2.0
    with nd.Session(graph=fresh) as sess:
        assert sess.run(good) == np.float32(3.0) * np.float32(2.0)


def test_a_failing_step_names_its_op_site_without_the_reset_advice():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, shape=None, name="x")
        r = nd.reshape(x, [2, 3], name="r")
    line = _line_of(
        'name="r"', test_a_failing_step_names_its_op_site_without_the_reset_advice
    )
    with nd.Session(graph=g) as sess:
        with pytest.raises(nd.errors.InvalidArgumentError) as e:
            sess.run(r, {x: np.ones(5)})
        assert sess.run(r, {x: np.arange(6.0)}).tolist() == [[0, 1, 2], [3, 4, 5]]
    text = str(e.value)
    assert text.startswith("Input to reshape is a tensor with 5 values")
    assert f"Original stack trace for 'r':\n  File \"{__file__}\", line {line}" in text
    assert "reset_default_graph" not in text


@pytest.fixture
def shell():
    """IPython's test shell with ``%load_ext nbdist``, restored afterwards."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()  # None when it already ran
    ip = get_ipython()
    loaded = "nbdist" in ip.extension_manager.loaded
    if not loaded:
        ip.run_line_magic("load_ext", "nbdist")
    yield ip
    if not loaded:
        ip.run_line_magic("unload_ext", "nbdist")


def test_ipython_shows_an_op_error_in_a_few_lines_and_tb_shows_all(shell, capsys):
    shell.run_cell("import nbdist as nd\nbad_graph = nd.Graph()", store_history=True)
    built = shell.execution_count
    shell.run_cell(
        "with bad_graph.as_default(), nd.device('/job:nosuchjob/task:0'):\n"
        "    bad = nd.constant(1.0, name='bad') + 1.0",
        store_history=True,
    )
    capsys.readouterr()
    result = shell.run_cell("nd.Session(graph=bad_graph).run(bad)", store_history=True)
    assert isinstance(result.error_in_exec, nd.errors.InvalidArgumentError)
    shown = ANSI.sub("", capsys.readouterr().out).strip().splitlines()
    assert shown == [
        (
            "InvalidArgumentError: Cannot assign a device for operation bad: "
            "Operation was explicitly assigned to /job:nosuchjob/task:0 but available "
            "devices are [ /job:localhost/replica:0/task:0/device:CPU:0 ]. Make sure "
            "the device specification refers to a valid device."
        ),
        "Original stack trace for 'bad':",
        f"  Cell In[{built}], line 2",
        "    bad = nd.constant(1.0, name='bad') + 1.0",
        (
            "The graph keeps 'bad', so every run of it fails the same way: start "
            "over with nd.reset_default_graph() (or build in a fresh nd.Graph())."
        ),
        "(%tb shows the full traceback)",
    ]
    shell.run_line_magic("tb", "")
    full = ANSI.sub("", capsys.readouterr().out)
    assert "placement.py" in full and "session.py" in full
    assert full.rstrip().endswith("fresh nd.Graph()).")
    # Errors that are not OpErrors keep IPython's own traceback.
    shell.run_cell("1 / 0", store_history=True)
    assert "ZeroDivisionError" in ANSI.sub("", capsys.readouterr().out)


def test_unloading_the_extension_restores_ipython_tracebacks(shell):
    assert shell.custom_exceptions == (nd.errors.OpError,)
    shell.run_line_magic("unload_ext", "nbdist")
    try:
        assert shell.custom_exceptions == ()
        assert op_site._file_labeler is None
    finally:
        shell.run_line_magic("load_ext", "nbdist")


@pytest.mark.slow
def test_a_notebook_keeps_task_output_kill_history_and_errors(kernel_name):
    from nbclient import NotebookClient

    nb = _notebook(
        "import nbdist as nd\n%load_ext nbdist",
        "%cluster start --ps 1 --workers 2",
        "%%cluster\nctx = nd.distribute.get_current_worker_context()\n"
        "print(f'hello from {ctx.task_type}:{ctx.task_id}')",
        "%cluster kill worker:1",
        "%cluster restart worker:1",
        "%cluster status",
        "with nd.device('/job:nosuchjob/task:0'):\n"
        "    bad = nd.constant(1.0, name='bad') + 1.0",
        "with nd.Session(target) as sess:\n    sess.run(bad)",
        "with nd.Session(target) as sess:\n    sess.run(nd.constant(2.0))",
        "nd.reset_default_graph()\nx = nd.constant([1.0, 2.0]) * 3.0\n"
        "with nd.Session(target) as sess:\n    print(sess.run(x).tolist())",
        "%cluster stop",
    )
    client = NotebookClient(nb, kernel_name=kernel_name, timeout=120, allow_errors=True)
    client.execute()
    _, _, cell, _, _, status, built, run_bad, run_other, valid, _ = nb.cells
    plain = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
    for task in ("worker:0", "worker:1"):
        assert f"hello from {task}" in plain, plain
    assert re.search(r"worker:1.*killed", _text(status)), _text(status)
    for failed in (run_bad, run_other):
        (error,) = [o for o in failed.outputs if o.output_type == "error"]
        assert error.ename == "InvalidArgumentError"
        assert "Cannot assign a device for operation bad" in error.evalue
        shown = ANSI.sub("", "\n".join(error.traceback)).splitlines()
        assert shown[0].startswith(
            "InvalidArgumentError: Cannot assign a device for operation bad: "
        )
        assert f"  Cell In[{built.execution_count}], line 2" in shown
        assert "nd.reset_default_graph()" in shown[-2]
        assert len(shown) == 6, shown
    assert _text(valid) == f"{(np.array([1.0, 2.0], np.float32) * 3).tolist()}\n"
