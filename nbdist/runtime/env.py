"""The one place where nbdist reads its environment variables: its own
``NBDIST_*`` and, for the cluster resolvers, ``TF_CONFIG``, ``SLURM_*`` and
``CUDA_VISIBLE_DEVICES`` (and whether the BLAS thread variables are set).

Every read happens at call time, so a value set after import (for example by a
test or a notebook cell) is seen by the next server or client created.

==================  ==========================================================
``NBDIST_TOKEN``    shared secret required on every RPC (``ConfigProto.
                    auth_token`` or ``Server(token=...)`` take precedence)
``NBDIST_FAULT_OWNER``  the cluster owner's credential: only a caller holding
                    it may set fault rules (``SetFaults``); a process without
                    it makes its own, which ``LocalCluster`` hands its tasks
``NBDIST_TLS_CERT`` PEM certificate chain a server (or an mTLS client) presents
``NBDIST_TLS_KEY``  PEM private key for ``NBDIST_TLS_CERT``
``NBDIST_TLS_CA``   PEM root certificates: clients (sessions, and servers
                    calling each other) verify servers with them
``NBDIST_TLS_CLIENT_AUTH``  ``1``: servers also require client certificates
                    signed by ``NBDIST_TLS_CA`` (mutual TLS)
``NBDIST_HEARTBEAT_INTERVAL_MS``  how often a server heartbeats to its cluster's
                    coordination service (default 250)
``NBDIST_HEARTBEAT_TIMEOUT_MS``  silence after which the service marks a task
                    DISCONNECTED (default 2000)
``NBDIST_COORDINATION_MAX_EVENTS``  events the service keeps (default 20000)
``NBDIST_SAME_HOST``  ``0``: servers neither serve nor use the same-host path
                    (Unix socket and shared memory between tasks of one host;
                    with TLS too: peers prove a secret derived from the key)
``NBDIST_PEER_TCP``  ``0``: servers neither serve nor use the TCP peer path
                    (steps and tensors to tasks on other hosts in the
                    same-host path's frames over TCP, beside gRPC; never with
                    TLS); ``always``: for peers on this host too
``NBDIST_PEER_STREAM``  ``0``: servers neither serve nor use the gRPC stream
                    path (steps and tensors in frames over one long-lived gRPC
                    stream per concurrent call, on the gRPC port, TLS
                    included; used for peers no other peer path reaches)
``NBDIST_SINGLE_PORT``  ``1``: a server listens on its gRPC port alone and
                    serves the TCP peer path there too (each connection's
                    first bytes say which; ``Server(single_port=True)``
                    takes precedence): for clusters whose tasks expose one
                    port each
==================  ==========================================================
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = [
    "COORDINATION_MAX_EVENTS",
    "FAULT_OWNER",
    "HEARTBEAT_INTERVAL_MS",
    "HEARTBEAT_TIMEOUT_MS",
    "PEER_STREAM",
    "PEER_TCP",
    "SAME_HOST",
    "SINGLE_PORT",
    "TF_CONFIG",
    "TLS_CA",
    "TLS_CERT",
    "TLS_CLIENT_AUTH",
    "TLS_KEY",
    "TOKEN",
    "blas_threads_chosen",
    "coordination_max_events",
    "cuda_visible_devices",
    "get",
    "heartbeat_interval_ms",
    "heartbeat_timeout_ms",
    "set_cuda_visible_devices",
    "single_port",
    "slurm_env",
    "slurm_var",
    "tf_config",
    "tls_client_auth",
    "tls_files",
    "token",
]

TOKEN = "NBDIST_TOKEN"
FAULT_OWNER = "NBDIST_FAULT_OWNER"
TLS_CERT = "NBDIST_TLS_CERT"
TLS_KEY = "NBDIST_TLS_KEY"
TLS_CA = "NBDIST_TLS_CA"
TLS_CLIENT_AUTH = "NBDIST_TLS_CLIENT_AUTH"
HEARTBEAT_INTERVAL_MS = "NBDIST_HEARTBEAT_INTERVAL_MS"
HEARTBEAT_TIMEOUT_MS = "NBDIST_HEARTBEAT_TIMEOUT_MS"
COORDINATION_MAX_EVENTS = "NBDIST_COORDINATION_MAX_EVENTS"
SAME_HOST = "NBDIST_SAME_HOST"
PEER_TCP = "NBDIST_PEER_TCP"
PEER_STREAM = "NBDIST_PEER_STREAM"
SINGLE_PORT = "NBDIST_SINGLE_PORT"


def get(name: str) -> str | None:
    """The value of ``name`` (an ``NBDIST_*`` variable); None when unset or blank."""
    if not name.startswith("NBDIST_"):
        raise ValueError(f"{name} is not an NBDIST_* variable")
    value = os.environ.get(name, "").strip()
    return value or None


def token() -> str | None:
    """``NBDIST_TOKEN``, or None."""
    return get(TOKEN)


def tls_files() -> tuple[str | None, str | None, str | None]:
    """``(NBDIST_TLS_CERT, NBDIST_TLS_KEY, NBDIST_TLS_CA)``, each a path or None."""
    return get(TLS_CERT), get(TLS_KEY), get(TLS_CA)


def tls_client_auth() -> bool:
    """Whether ``NBDIST_TLS_CLIENT_AUTH`` asks for mutual TLS (1/true/yes)."""
    return (get(TLS_CLIENT_AUTH) or "").lower() in ("1", "true", "yes", "on")


def single_port() -> bool:
    """Whether ``NBDIST_SINGLE_PORT`` asks servers for one port (1/true/yes)."""
    return (get(SINGLE_PORT) or "").lower() in ("1", "true", "yes", "on")


def _positive_int(name: str) -> int | None:
    value = get(name)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return n


def heartbeat_interval_ms() -> int | None:
    """``NBDIST_HEARTBEAT_INTERVAL_MS``, or None."""
    return _positive_int(HEARTBEAT_INTERVAL_MS)


def heartbeat_timeout_ms() -> int | None:
    """``NBDIST_HEARTBEAT_TIMEOUT_MS``, or None."""
    return _positive_int(HEARTBEAT_TIMEOUT_MS)


def coordination_max_events() -> int | None:
    """``NBDIST_COORDINATION_MAX_EVENTS``, or None."""
    return _positive_int(COORDINATION_MAX_EVENTS)


# -- the cluster resolvers' variables (TF_CONFIG, SLURM_*, CUDA_VISIBLE_DEVICES)
# Every read happens at call time, so a resolver sees the environment as it is
# now, like TensorFlow's resolvers, which re-read ``TF_CONFIG`` on each access.

TF_CONFIG = "TF_CONFIG"


def blas_threads_chosen() -> bool:
    """Whether the user chose the BLAS thread count (``OMP_NUM_THREADS``,
    ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS`` set): a server then leaves
    it as it is."""
    return any(os.environ.get(v, "").strip() for v in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))


def tf_config() -> dict[str, Any]:
    """``TF_CONFIG`` parsed from JSON; ``{}`` when it is unset or blank.

    Raises:
      ValueError: if ``TF_CONFIG`` is not a JSON object.
    """
    raw = os.environ.get(TF_CONFIG, "")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{TF_CONFIG} is not valid JSON ({e}): {raw!r}") from None
    if not isinstance(value, dict):
        raise ValueError(  # noqa: TRY004 - a bad value of the variable
            f"{TF_CONFIG} must be a JSON object like "
            '{"cluster": {...}, "task": {"type": ..., "index": ...}}, '
            f"got: {raw!r}"
        )
    return value


def slurm_env() -> dict[str, str]:
    """A snapshot of every ``SLURM_*`` variable."""
    return {k: v for k, v in os.environ.items() if k.startswith("SLURM_")}


def slurm_var(*names: str) -> str:
    """The first of ``SLURM_<name>`` that is set, for each name in turn.

    Raises:
      RuntimeError: if none is set (as TF: "Not running inside a SLURM step?").
    """
    env = slurm_env()
    for name in names:
        value = env.get("SLURM_" + name)
        if value is not None:
            return value
    wanted = " or ".join("SLURM_" + n for n in names)
    raise RuntimeError(
        f"{wanted} not found in environment. Not running inside a SLURM step?"
    )


def cuda_visible_devices() -> str | None:
    """``CUDA_VISIBLE_DEVICES``, or ``None`` when unset."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def set_cuda_visible_devices(value: str) -> None:
    """Sets ``CUDA_VISIBLE_DEVICES`` for this process and its children."""
    os.environ["CUDA_VISIBLE_DEVICES"] = value
