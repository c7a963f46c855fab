"""``Scaffold``: the init, ready and local-init ops, feeds and the ``Saver`` a
training session is built from, as TF's ``monitored_session.Scaffold``.
"""

from __future__ import annotations

from nbdist.ops import summary_ops
from nbdist.framework.ops import GraphKeys, get_default_graph
from nbdist.train import tf_logging as logging


class Scaffold:
    """The pieces a training session needs: init, ready and local-init ops (with
    their feeds ``init_feed_dict`` and ``local_init_feed_dict``), ``init_fn``
    and a ``Saver``. Missing pieces are taken from the graph's collections, or
    built, by ``finalize()``; ``copy_from_scaffold`` fills what is not given
    from another scaffold.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     p = nd.placeholder(nd.float32, [2])
    ...     v = nd.Variable(p, collections=[nd.GraphKeys.LOCAL_VARIABLES])
    ...     scaffold = nd.train.Scaffold(local_init_op=v.initializer,
    ...                                  local_init_feed_dict={p: [1.0, 2.0]})
    ...     creator = nd.train.ChiefSessionCreator(scaffold=scaffold)
    ...     with nd.train.MonitoredSession(session_creator=creator) as sess:
    ...         print(sess.run(v))
    [1. 2.]
    """

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None,
                 saver=None, copy_from_scaffold=None, local_init_feed_dict=None):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")

            def coalesce(a, b):
                return a if a is not None else b

            init_op = coalesce(init_op, copy_from_scaffold.init_op)
            init_feed_dict = coalesce(init_feed_dict, copy_from_scaffold.init_feed_dict)
            init_fn = coalesce(init_fn, copy_from_scaffold._user_init_fn)
            ready_op = coalesce(ready_op, copy_from_scaffold.ready_op)
            ready_for_local_init_op = coalesce(
                ready_for_local_init_op, copy_from_scaffold.ready_for_local_init_op)
            local_init_op = coalesce(local_init_op, copy_from_scaffold.local_init_op)
            local_init_feed_dict = coalesce(local_init_feed_dict,
                                            copy_from_scaffold.local_init_feed_dict)
            summary_op = coalesce(summary_op, copy_from_scaffold.summary_op)
            saver = coalesce(saver, copy_from_scaffold.saver)
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._summary_op = summary_op
        self._saver = saver

    def finalize(self):
        """Builds the missing pieces, then finalizes the default graph."""
        from nbdist.ops.variables import (
            global_variables,
            report_uninitialized_variables,
        )

        if self._init_op is None:
            self._init_op = Scaffold.get_or_default(
                "init_op", GraphKeys.INIT_OP,
                lambda: _initializer(global_variables(), "init"))
        if self._ready_op is None:
            self._ready_op = Scaffold.get_or_default(
                "ready_op", GraphKeys.READY_OP, report_uninitialized_variables)
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = Scaffold.get_or_default(
                "ready_for_local_init_op", GraphKeys.READY_FOR_LOCAL_INIT_OP,
                lambda: report_uninitialized_variables(global_variables()))
        if self._local_init_op is None:
            self._local_init_op = Scaffold.get_or_default(
                "local_init_op", GraphKeys.LOCAL_INIT_OP,
                Scaffold.default_local_init_op)
        if self._summary_op is None:
            self._summary_op = Scaffold.get_or_default(
                "summary_op", GraphKeys.SUMMARY_OP, summary_ops.merge_all)
        if self._saver is None:
            self._saver = _get_saver_or_default()
        build = getattr(self._saver, "build", None)
        if build is not None:
            build()
        get_default_graph().finalize()
        logging.info("Graph was finalized.")
        return self

    init_fn = property(lambda self: self._init_fn)
    init_op = property(lambda self: self._init_op)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    local_init_feed_dict = property(lambda self: self._local_init_feed_dict)

    @staticmethod
    def get_or_default(arg_name, collection_key, default_constructor):
        """The only member of ``collection_key``, else a new default (added to
        the collection)."""
        elements = get_default_graph().get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(
                    f'More than one item in the collection "{collection_key}". '
                    "Please indicate which one to use by passing it to the "
                    f"nd.train.Scaffold constructor as:  "
                    f"nd.train.Scaffold({arg_name}=item to use)")
            return elements[0]
        op = default_constructor()
        if op is not None:
            get_default_graph().add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op():
        """Initialises the local variables and the lookup tables (as TF)."""
        from nbdist.ops.variables import local_variables

        tables = get_default_graph().get_collection(GraphKeys.TABLE_INITIALIZERS)
        with get_default_graph().control_dependencies(tables):
            return _initializer(local_variables(), "init")


def _initializer(var_list, name):
    """An op running the initializers of ``var_list`` (a no-op if empty)."""
    from nbdist.ops.control_flow_ops import no_op

    g = get_default_graph()
    with g.control_dependencies([v.initializer for v in var_list]):
        return no_op(name=name)


def _get_saver_or_default():
    """The graph's only ``SAVERS`` member, else a new ``Saver`` (added there)."""
    g = get_default_graph()
    savers = g.get_collection(GraphKeys.SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(f"More than one item in collection {GraphKeys.SAVERS}. "
                               "Please indicate which one to use by passing it to "
                               "the constructor.")
        return savers[0]
    from nbdist.train.saver import Saver

    saver = Saver(sharded=True, allow_empty=True)
    if saver is not None:
        g.add_to_collection(GraphKeys.SAVERS, saver)
    return saver



__all__ = ["Scaffold"]
