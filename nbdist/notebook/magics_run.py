"""``%%cluster``: a cell run once per selected task of the running cluster,
each in its own thread with its own default graph and worker context; the
tasks' outputs fill a ``CellRunView`` live (in a kernel) and the cell returns
``{task: value of the last expression}``."""

from __future__ import annotations

from IPython.core.error import UsageError

from nbdist.notebook.magics_usage import need_cluster, one_line

__all__ = ["run_cell"]


def run_cell(magics, cell, args):
    """Runs ``cell`` on the tasks ``args.tasks`` selects (``--timeout`` S)."""
    from nbdist.notebook.cell_runner import TaskRun, run_cell_on_tasks, select_tasks
    from nbdist.notebook.live_view import in_kernel
    from nbdist.notebook.widget_cell import CellRunView

    cluster = need_cluster(magics)
    spec = cluster.cluster_spec
    selected = select_tasks(spec, args.tasks)
    targets = {key: "grpc://" + spec.task_address(*key) for key in selected}
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    source = magics.shell.transform_cell(cell)
    try:
        compile(source, "<%%cluster>", "exec")
    except SyntaxError as e:
        raise UsageError(
            f"the cell does not compile: {e.msg} (line {e.lineno})"
        ) from None
    view = CellRunView([TaskRun(j, i, targets[(j, i)]) for j, i in selected])
    live = in_kernel()
    if live:
        from IPython.display import display

        # While it runs: the widget (tabs filling live) under a display id,
        # with one line that stays when the widget goes at the end (the view
        # is shown again below, every task's output in its text forms). Never
        # an update that changes text (nbval sees only the first display of
        # an output, nbclient and Jupyter the updated one), nor one that
        # leaves an empty output.
        names = ", ".join(r.name for r in view.runs)
        line = f"%%cluster on {names} (each task's output below)"
        lines = {"text/plain": line,
                 "text/html": f"<div class='muted'>{line}</div>"}
        widget = {
            k: v
            for k, v in view.widget._repr_mimebundle_().items()
            if k.startswith("application/vnd.jupyter.widget")
        }
        handle = display({**widget, **lines}, raw=True, display_id=True)

    def changed(run):
        for i, r in enumerate(view.runs):
            if r.name == run.name:
                view.runs[i] = run
        view.changed(run)

    runs = run_cell_on_tasks(
        source,
        spec,
        targets,
        magics.shell.user_ns,
        tasks=args.tasks,
        timeout=args.timeout,
        on_change=changed,
    )
    view.runs = runs
    view.refresh()
    view.close()
    if live:
        handle.update(lines, raw=True)
        display(view)
    if not live:
        for r in runs:
            text = r.text + r.traceback
            if text:
                print(f"[{r.name}]")
                print("  " + text.rstrip("\n").replace("\n", "\n  "))
    results = {r.name: r.result for r in runs if r.status == "done"}
    magics.results = results
    failed = [r for r in runs if r.status != "done"]
    if failed:
        parts = "; ".join(
            f"{r.name} timed out after {args.timeout:g} s"
            if r.status == "timed out"
            else f"{r.name}: {type(r.error).__name__}: {one_line(r.error)}"
            for r in failed
        )
        where = "in its tab" if live else "above"
        raise UsageError(
            f"%%cluster: {len(failed)} of {len(runs)} tasks failed: "
            f"{parts} (traceback {where})"
        )
    if any(v is not None for v in results.values()):
        return results
    return None
