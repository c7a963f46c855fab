"""Optional authentication (a shared token) and encryption (TLS) for nbdist RPCs.

Token. When a server has a token, every RPC of every service (streams
included) must carry it in the ``authorization`` metadata as ``Bearer
<token>``; anything else is answered ``UNAUTHENTICATED`` before the request is
even read (none of its bytes are buffered). The token comes from, in order:
``Server(..., token=...)``, the server's ``ConfigProto.auth_token``,
``NBDIST_TOKEN``. Clients (sessions and
the servers' own worker clients) send the token of their ``ConfigProto``, else
``NBDIST_TOKEN``. Tokens are compared in constant time. A token alone does not
encrypt anything: use it with TLS on untrusted networks.

TLS. ``TlsConfig(cert, key, ca, client_auth=False)`` holds PEM data or
paths to PEM files:

- a server needs ``cert`` and ``key``; with ``client_auth`` it also requires
  client certificates signed by ``ca`` (mutual TLS);
- a client needs ``ca`` to verify servers (without it, the system roots are
  used) and presents ``cert``/``key`` when it has them. A server is also a
  client of the other tasks of its cluster, so in a TLS cluster every task
  gets ``cert``, ``key`` and ``ca``.

``Server(..., tls=TlsConfig(...))`` and ``GrpcMasterClient(..., tls=...)``
take one explicitly (``tls=False``: plaintext); otherwise
``TlsConfig.from_env()`` reads ``NBDIST_TLS_CERT``, ``NBDIST_TLS_KEY``,
``NBDIST_TLS_CA`` and ``NBDIST_TLS_CLIENT_AUTH``, and TLS is off when none of
the first three is set. A server's certificate must name the host clients
dial (e.g. ``localhost`` and ``127.0.0.1`` in its subjectAltName).

>>> cfg = TlsConfig(cert=b"-----BEGIN CERTIFICATE-----...", key=b"...")
>>> cfg.enabled
True
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass

import grpc
from nbdist.runtime import env

__all__ = [
    "TlsConfig",
    "TokenInterceptor",
    "call_metadata",
    "peer_path_secret",
    "resolve_tls",
    "resolve_token",
]

_HEADER = "authorization"
_PREFIX = "Bearer "


def resolve_token(explicit: str | None = None, config=None) -> str | None:
    """The token to use: ``explicit``, else ``config.auth_token``, else the env."""
    if explicit:
        return explicit
    if config is not None and getattr(config, "auth_token", ""):
        return config.auth_token
    return env.token()


def call_metadata(token: str | None) -> tuple:
    """The metadata a client attaches to every call."""
    return ((_HEADER, _PREFIX + token),) if token else ()


def _refuse(request_iterator, context):
    context.abort(
        grpc.StatusCode.UNAUTHENTICATED,
        "Missing or wrong nbdist token (set NBDIST_TOKEN or "
        "ConfigProto.auth_token to the server's token)",
    )


# A request-streaming handler answers without reading a single message, so a
# call without the token is refused before its bytes are buffered (a unary
# handler would read the whole request first). On the wire every call kind
# looks the same: the client gets UNAUTHENTICATED whatever it called.
_DENY = grpc.stream_unary_rpc_method_handler(_refuse)


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects every RPC whose ``authorization`` metadata is not the token."""

    def __init__(self, token: str):
        self._expected = (_PREFIX + token).encode()

    def intercept_service(self, continuation, handler_call_details):
        got = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == _HEADER:
                got = value if isinstance(value, str) else value.decode("latin-1")
                break
        handler = continuation(handler_call_details)
        if hmac.compare_digest(got.encode("utf-8", "replace"), self._expected):
            return handler
        return None if handler is None else _DENY


def _pem(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    text = str(value)
    if text.lstrip().startswith("-----BEGIN"):
        return text.encode()
    with open(text, "rb") as f:
        return f.read()


@dataclass(frozen=True)
class TlsConfig:
    """PEM ``cert`` (chain), ``key`` and ``ca`` (roots): bytes, PEM text or paths."""

    cert: bytes | str | None = None
    key: bytes | str | None = None
    ca: bytes | str | None = None
    client_auth: bool = False

    @classmethod
    def from_env(cls) -> TlsConfig | None:
        """From ``NBDIST_TLS_CERT/KEY/CA/CLIENT_AUTH``; None when the first three
        are unset."""
        cert, key, ca = env.tls_files()
        if not (cert or key or ca):
            return None
        return cls(cert, key, ca, env.tls_client_auth())

    @property
    def enabled(self) -> bool:
        return bool(self.cert or self.key or self.ca)

    def server_credentials(self) -> grpc.ServerCredentials:
        if not (self.cert and self.key):
            raise ValueError(
                "A TLS server needs both a certificate and a key "
                "(NBDIST_TLS_CERT and NBDIST_TLS_KEY)"
            )
        if self.client_auth and not self.ca:
            raise ValueError(
                "Mutual TLS needs the CA of the client certificates (NBDIST_TLS_CA)"
            )
        return grpc.ssl_server_credentials(
            [(_pem(self.key), _pem(self.cert))],
            root_certificates=_pem(self.ca) if self.client_auth else None,
            require_client_auth=self.client_auth,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.ca),
            private_key=_pem(self.key) if self.cert and self.key else None,
            certificate_chain=_pem(self.cert) if self.cert and self.key else None,
        )


_PEM_BODY = re.compile(rb"-----BEGIN [^-]+-----(.*?)-----END [^-]+-----",
                       re.DOTALL)


def peer_path_secret(token: str | None, tls: TlsConfig | None) -> str | None:
    """The secret a task's peer paths (the same-host socket) prove, never send:
    the token without TLS; with TLS, an HMAC keyed by the task's private key
    (its DER bytes, whatever the PEM's line breaks) over the token, so only
    holders of the cluster's key (and token) pass. None: no secret (no TLS and
    no token, or TLS without a key: such a client stays on gRPC)."""
    if tls is None:
        return token or None
    if not (tls.cert and tls.key):
        return None
    pem = _pem(tls.key)
    try:
        der = b"".join(base64.b64decode(b"".join(body.split()))
                       for body in _PEM_BODY.findall(pem)) or pem
    except ValueError:  # not plain base64 (headers): the file's bytes, then
        der = pem
    return hmac.new(der, b"nbdist peer path v1\0" + (token or "").encode(),
                    hashlib.sha256).hexdigest()


def resolve_tls(tls) -> TlsConfig | None:
    """``tls`` as given (a TlsConfig, a dict of its fields, False for off), else
    from the environment."""
    if tls is False:
        return None
    if tls is None or tls is True:
        cfg = TlsConfig.from_env()
        if tls is True and cfg is None:
            raise ValueError(
                "tls=True but none of NBDIST_TLS_CERT, NBDIST_TLS_KEY, "
                "NBDIST_TLS_CA is set"
            )
        return cfg
    if isinstance(tls, dict):
        return TlsConfig(**tls)
    if isinstance(tls, TlsConfig):
        return tls if tls.enabled else None
    raise TypeError(
        f"tls must be a TlsConfig, a dict, True/False or None; got {type(tls).__name__}"
    )
