"""``nd.Server``: one task of a cluster, served by the transport its protocol names.

``Server(...)`` builds the ``Server`` subclass that ``runtime.transports`` has
for ``protocol`` (default ``grpc``), as TF's ``server_lib`` asks a
``ServerFactory``; code above the runtime makes servers through this class and
never imports a transport.
"""

from __future__ import annotations

from nbdist.proto import server_def_pb2
from nbdist.runtime import transports


class Server:
    """An in-process nbdist server: one task of a cluster.

    ``server_or_cluster_def`` is a ``ServerDef``, ``ClusterDef``,
    ``ClusterSpec`` or dict; ``job_name``/``task_index`` choose this task when
    the cluster has several; ``protocol`` picks the transport (``"grpc"``).
    See the transport's class (``runtime.grpc.server.GrpcServer``) for the rest.

    >>> import nbdist as nd
    >>> server = nd.Server.create_local_server()
    >>> with nd.Session(server.target) as sess:
    ...     sess.run(nd.constant("Hello, distributed!"))
    b'Hello, distributed!'
    >>> server.stop()
    """

    def __new__(cls, server_or_cluster_def=None, job_name=None, task_index=None,
                protocol=None, *args, **kwargs):
        if cls is Server:
            if not protocol and isinstance(server_or_cluster_def,
                                           server_def_pb2.ServerDef):
                protocol = server_or_cluster_def.protocol
            cls = transports.server_class(protocol or None)
        return super().__new__(cls)

    @classmethod
    def create_local_server(cls, config=None, start=True, **kwargs) -> Server:
        """A single-task server on a free port of 127.0.0.1 (job ``localhost``)."""
        return cls({"localhost": ["localhost:0"]}, config=config, start=start,
                   **kwargs)

    def join(self):
        """Blocks until ``stop()`` is called (from another thread or a signal)."""
        # In slices: Ctrl-C may reach another thread first, and Python raises
        # KeyboardInterrupt only when the main thread next wakes.
        while not self._stopped.wait(0.25):
            pass

    @property
    def stopped(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stopped.is_set()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


__all__ = ["Server"]
