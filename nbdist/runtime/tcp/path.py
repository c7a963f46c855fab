"""Registers the TCP peer path (``runtime.transports._BUILT_IN_PATHS`` names
this module). Kept apart from the package, which a process may import for its
channels alone: the registry imports this after the same-host path's package,
so the TCP path is tried after it (a peer this host reaches directly never
goes by TCP), whatever was imported before."""

from __future__ import annotations

from nbdist.runtime import transports
from nbdist.runtime.tcp import TcpPath

transports.register_peer_path("tcp", TcpPath())
