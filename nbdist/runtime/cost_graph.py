"""``RunMetadata.cost_graph``: the nodes a step ran on every task, with what
each cost (TF's ``CostGraphDef``), filled when the session's
``graph_options.build_cost_model`` asks for it, as TF's sessions do.

A node's ``compute_cost`` and ``compute_time`` are the microseconds its kernel
took in the step (from the step's trace), its outputs' sizes the bytes they
held; inputs and control inputs name other nodes of the cost graph by ``id``.

>>> import nbdist as nd
>>> x = nd.constant([1.0, 2.0], name="x")
>>> y = nd.reduce_sum(x * 2.0, name="y")
>>> cfg = nd.ConfigProto(graph_options=nd.GraphOptions(build_cost_model=1))
>>> md = nd.RunMetadata()
>>> with nd.Session(config=cfg) as sess:
...     _ = sess.run(y, run_metadata=md)
>>> "y" in [n.name for n in md.cost_graph.node]
True
"""

from __future__ import annotations

from nbdist.proto import config_pb2


def cost_model_due(graph_options: config_pb2.GraphOptions, step: int) -> bool:
    """Whether the ``step``-th run (from 0) of one signature builds the cost
    model: every ``build_cost_model`` runs once ``build_cost_model_after``
    runs were skipped (TF's rule)."""
    every = graph_options.build_cost_model
    if every <= 0:
        return False
    measured = step - graph_options.build_cost_model_after
    return measured >= 0 and (measured + 1) % every == 0


def fill_cost_graph(cost_graph, graph_defs, stats) -> None:
    """Adds to ``cost_graph`` the nodes of ``graph_defs`` (the step's partition
    graphs) that ran, with their times and output sizes from ``stats`` (the
    step's trace: ``(task, [(name, op, device, start, end, out_bytes, tid)]``)."""
    ran = {}
    for _task, entries in stats:
        for name, _op, device, start, end, out_bytes, _tid in entries:
            ran[name] = (device, max(0, end - start), out_bytes)
    nodes = [n for g in graph_defs for n in g.node if n.name in ran]
    ids = {n.name: i for i, n in enumerate(nodes)}
    for n in nodes:
        device, micros, out_bytes = ran[n.name]
        c = cost_graph.node.add(name=n.name, device=n.device or device,
                                id=ids[n.name], compute_cost=micros,
                                compute_time=micros)
        for inp in n.input:
            if inp.startswith("^"):
                if inp[1:] in ids:
                    c.control_input.append(ids[inp[1:]])
                continue
            src, _, port = inp.partition(":")
            if src in ids:
                c.input_info.add(preceding_node=ids[src],
                                 preceding_port=int(port or 0))
        for size in out_bytes:
            c.output_info.add(size=size)
