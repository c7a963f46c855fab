"""The framed protocol: a task's handlers served, and its peers reached, one
frame per call each way over a kept connection, whatever the link.

- ``wire``: frames (a JSON header and the tensors' raw bytes; over a link
  that shares memory, large tensors in memfd segments both ends map);
- ``handshake``: both ends prove the cluster's secret before a request;
- ``service``: ``FramedService``, a codec over ``runtime.service``'s handlers
  (admission, de-duplication in gRPC's ``(method, request id)`` key space,
  validation, hang-ups);
- ``channel``: ``FramedChannel``, a client's connections to one service (every
  call with a fresh request id);
- ``peers``: a task's step paths and ``TensorTransport`` over channels;
- ``collective_push``: all-reduce chunks pushed and consumed in place;
- ``link``: what a *link policy* supplies: how to listen, accept and dial, who
  the peer is, and how bulk bytes move;
- ``port_sharing``: ``SharedPort``, one listening port for framed clients (a
  preamble first) and another protocol (relayed to its server): a
  single-port task's.

The policies live beside it: ``runtime/samehost`` (a Unix socket and memfd
segments) and ``runtime/tcp`` (a TCP stream, TLS-wrapped in a TLS cluster).
This package is not a transport: it names none, and never branches on which
link it runs over.
"""

from __future__ import annotations
