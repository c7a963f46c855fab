"""How a framed connection (same-host or TCP) proves, both ways, that its
ends belong to one cluster, before any request is read (and before a client
sends one).

The abstract socket can be reached by any process of the network namespace,
and its name can be taken by any of them before the server binds it. So
neither end gives away what it knows: each proves it holds the cluster's
secret by an HMAC over fresh random challenges of both ends and the server's
address (challenge-response; compared with ``hmac.compare_digest``). The
secret is what the server hands its peer paths (``auth.peer_path_secret``:
the token, or in a TLS cluster a key derived from the task's TLS private key
and the token), never sent. A process without it can neither connect (the
server refuses it, ``UNAUTHENTICATED``) nor pass for a server (the client
refuses an answer without the server's proof, so it sends no request, tensor
or segment there); both sides log the refusal and the client's calls stay on
gRPC (with TLS, then, certificates decide).

The exchange (JSON frames of ``framed.wire``)::

    client -> server   {"op": "hello", "nonce": Nc}
    server -> client   {"challenge": Ns}                      (server with a secret)
    client -> server   {"op": "prove", "proof": HMAC(K, client, Nc, Ns, address, B)}
    server -> client   {"task", "address", "incarnation",
                        "proof": HMAC(K, server, Nc, Ns, address, B, task,
                                      incarnation)}

``B`` binds both proofs to the channel as each end sees it (``binding``): the
socket's endpoints, server's then client's (the abstract name and an unbound
client; over TCP, the server's and the client's address and port). A relay — a process that took
the same-host name and passes the bytes on to the task's TCP port, or any
process between two sockets — joins two channels that each end sees
differently, so neither end's proof passes at the other and the relay never
sees a request. (So does an address translation between two hosts: their
calls stay on gRPC.)

Where the link tells the peer's user (the same-host socket's ``SO_PEERCRED``:
the link policy's ``peer_user``, passed in as ``uid``) both ends also check
it: an abstract name has no permission bits, so a process of another user
could take it or call it; it is refused whatever it proves.

Without a secret a server answers the hello with its task, address and
incarnation at once (as before) and a client without one accepts that; a
client with a secret never does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time

from nbdist import errors
from nbdist.runtime.framed.common import HELLO_BYTES, HELLO_TIMEOUT_S, close_fd
from nbdist.runtime.framed.wire import (
    error_header,
    raise_if_error,
    recv_frame,
    send_frame,
)
from nbdist.runtime.transports import ChannelBroken

_log = logging.getLogger("nbdist")

NONCE_BYTES = 32
_KEY_LABEL = b"nbdist same-host key v1"
_LOG_EVERY_S = 30.0  # a refusal is logged at most this often per (side, peer)


class Refused(ChannelBroken):
    """The other end did not prove the cluster's secret (or asked us to and we
    hold none): not transient, so the peer is not tried again soon."""


def cluster_key(secret: str | None) -> bytes | None:
    """The HMAC key both ends of one cluster derive from their peer-path
    secret; None without one."""
    if not secret:
        return None
    return hmac.new(_KEY_LABEL, secret.encode(), hashlib.sha256).digest()


def _proof(key: bytes, *parts) -> str:
    message = json.dumps(list(parts), separators=(",", ":")).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def binding(sock, serving: bool) -> list:
    """The channel as this end of ``sock`` sees it, the same at both ends of
    one connection: ``[server's end, client's end]``."""
    here, there = _end(sock.getsockname()), _end(sock.getpeername())
    return [here, there] if serving else [there, here]


def _end(addr) -> str:
    """A socket's end as text: an abstract name, "" (an unbound Unix client),
    ``host:port`` (IPv4 on a dual-stack socket as IPv4)."""
    if isinstance(addr, bytes):
        return addr.decode("latin-1")
    if isinstance(addr, str):
        return addr
    host = str(addr[0]).removeprefix("::ffff:")
    return f"{host}:{addr[1]}"


def _matches(given, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(
        given.encode("ascii", "replace"), expected.encode())


_last_logged: dict = {}
_log_lock = threading.Lock()


def log_refusal(side: str, peer: str, message: str,
                level: int = logging.WARNING) -> None:
    """Logs a refused same-host connection, once per ``_LOG_EVERY_S`` for each
    (side, peer): a peer with other credentials tries again."""
    now = time.monotonic()
    with _log_lock:
        if now - _last_logged.get((side, peer), -_LOG_EVERY_S) < _LOG_EVERY_S:
            return
        _last_logged[(side, peer)] = now
    _log.log(level, "%s", message)


def client_handshake(sock, address: str, key: bytes | None, uid: int | None = None,
                     label: str = "same-host") -> dict:
    """Runs the client's half on a connected socket; the server's answer
    (``task``, ``address``, ``incarnation``) once it proved itself. Raises
    ``Refused`` (logged) when either end fails the other's check, the peer's
    OpError for other answers, ChannelBroken-worthy OSError/ValueError.
    ``uid``: the server process's user, when the link tells; ``label``: how
    messages name the link."""
    if uid is not None and uid != os.geteuid():
        message = (f"The {label} socket of {address} is held by a process of "
                   f"another user (uid {uid}): refused (gRPC instead)")
        log_refusal("client", address, message, logging.ERROR)
        raise Refused(message)
    channel = binding(sock, serving=False)
    nonce = secrets.token_hex(NONCE_BYTES)
    send_frame(sock, {"op": "hello", "nonce": nonce})
    header = _recv_small(sock)
    _raise_refused_if_unauthenticated(header, address, label)
    raise_if_error(header)
    challenge = header.get("challenge")
    if challenge is None:
        if key is not None:
            message = (f"The {label} socket of {address} does not prove the "
                       "cluster's credentials: not used (gRPC instead)")
            log_refusal("client", address, message)
            raise Refused(message)
        return header
    if key is None:
        raise Refused(f"The {label} socket of {address} needs the cluster's "
                      "credentials, which this process does not hold")
    if not isinstance(challenge, str) or len(challenge) != 2 * NONCE_BYTES:
        raise ValueError(f"malformed {label} challenge from {address}")
    send_frame(sock, {"op": "prove",
                      "proof": _proof(key, "client", nonce, challenge, address,
                                      channel)})
    header = _recv_small(sock)
    _raise_refused_if_unauthenticated(header, address, label)
    raise_if_error(header)
    expected = _proof(key, "server", nonce, challenge, address, channel,
                      header.get("task"), header.get("incarnation"))
    if not _matches(header.get("proof"), expected) or \
            header.get("address") != address:
        message = (f"The {label} socket of {address} answered without the "
                   "cluster's proof for this channel: not used (gRPC instead)")
        log_refusal("client", address, message, logging.ERROR)
        raise Refused(message)
    return header


def _raise_refused_if_unauthenticated(header: dict, address: str, label: str) -> None:
    err = header.get("error")
    if isinstance(err, dict) and err.get("code") == errors.UNAUTHENTICATED:
        message = (f"The {label} socket of {address} refused this process's "
                   f"credentials ({str(err.get('message'))[:200]}): gRPC instead")
        log_refusal("client", address, message, logging.ERROR)
        raise Refused(message)


def _recv_small(sock) -> dict:
    try:
        header, _, fds = recv_frame(sock, 0, HELLO_BYTES)
    except errors.ResourceExhaustedError as e:  # another protocol answered
        raise ValueError(f"not a framed handshake: {e}") from None
    for fd in fds:  # a handshake carries no segments
        close_fd(fd)
    return header


def server_handshake(conn, address: str, task: str, incarnation,
                     key: bytes | None, peer: str, uid: int | None = None,
                     label: str = "same-host") -> bool:
    """Runs the server's half on an accepted connection (``peer``: who, for the
    log); whether the client proved itself. A refused client gets
    ``UNAUTHENTICATED`` and nothing else; nothing of a request is read."""
    conn.settimeout(HELLO_TIMEOUT_S)  # a silent connection is not kept
    if uid is not None and uid != os.geteuid():
        return _refuse(conn, task, peer, f"a process of another user, uid {uid}",
                       label)
    hello = _recv_small(conn)
    nonce = hello.get("nonce")
    if hello.get("op") != "hello" or (key is not None and (
            not isinstance(nonce, str) or len(nonce) != 2 * NONCE_BYTES)):
        return _refuse(conn, task, peer, f"no {label} handshake", label)
    if key is None:
        conn.settimeout(None)
        send_frame(conn, {"task": task, "address": address,
                          "incarnation": incarnation})
        return True
    channel = binding(conn, serving=True)
    challenge = secrets.token_hex(NONCE_BYTES)
    send_frame(conn, {"challenge": challenge})
    answer = _recv_small(conn)
    if answer.get("op") != "prove" or not _matches(
            answer.get("proof"),
            _proof(key, "client", nonce, challenge, address, channel)):
        return _refuse(conn, task, peer, "wrong credentials, or a proof made for "
                       "another channel: a relay, or an address translation "
                       "between the two ends", label)
    conn.settimeout(None)
    send_frame(conn, {"task": task, "address": address, "incarnation": incarnation,
                      "proof": _proof(key, "server", nonce, challenge, address,
                                      channel, task, incarnation)})
    return True


def _refuse(conn, task: str, peer: str, why: str, label: str) -> bool:
    log_refusal("server", f"{task} {peer}", f"{task}: refused a {label} "
                f"connection from {peer} ({why}); it can use gRPC")
    send_frame(conn, error_header(errors.UnauthenticatedError(
        None, None, f"Missing or wrong nbdist token or TLS key for the "
        f"{label} channel of {task}")))
    return False


__all__ = ["Refused", "binding", "client_handshake", "cluster_key", "log_refusal",
           "server_handshake"]
