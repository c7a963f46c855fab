"""A TLS cluster on one host against a token cluster (issue: TLS clusters keep
the same-host path). Run on demand:

    python benchmarks/bench_samehost_tls.py [--seconds=5] [--repeats=3]

Runs ``bench_training``'s classic between-graph trainer (MLP 784-256-10, batch
128, one OS process per task) with the cluster's security set by the
environment every task inherits: ``token`` (``NBDIST_TOKEN``), ``tls``
(``NBDIST_TLS_CERT/KEY/CA`` of a throwaway CA made here, plus the token) and,
for reference, ``tls, no same-host`` (``NBDIST_SAME_HOST=0``: every call over
gRPC with TLS). The modes alternate within each round; the median global
steps/s of each, and CPU ms per global step summed over the tasks (from
``/proc``: steadier than steps/s on a shared machine), are printed in ONE table
with TLS's ratio to the token run.
Needs the ``cryptography`` package (the ``test`` extra) for the certificates.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import statistics
import sys
import tempfile

from bench_training import LABELS, run_once

TOKEN = "bench-token"
MODES = ("token", "tls", "tls, no same-host")


def write_pki(directory: str, addresses=()) -> dict:
    """A throwaway CA and one certificate/key for 127.0.0.1, localhost and
    ``addresses`` (IPs); ``NBDIST_TLS_*`` settings naming their files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert_for(name, key, issuer_name, issuer_key, ca):
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
             .issuer_name(issuer_name).public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1)))
        if ca:
            b = b.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        else:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                *(x509.IPAddress(ipaddress.ip_address(a))
                  for a in {"127.0.0.1", *addresses})]), False)
        return b.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = cert_for("bench CA", ca_key, ca_name, ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = cert_for("localhost", key, ca_name, ca_key, False)
    files = {
        "NBDIST_TLS_CA": ca.public_bytes(serialization.Encoding.PEM),
        "NBDIST_TLS_CERT": cert.public_bytes(serialization.Encoding.PEM),
        "NBDIST_TLS_KEY": key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()),
    }
    env = {}
    for var, data in files.items():
        path = os.path.join(directory, var.lower() + ".pem")
        with open(path, "wb") as f:
            f.write(data)
        env[var] = path
    return env


def mode_env(mode: str, pki: dict) -> dict:
    env = {"NBDIST_TOKEN": TOKEN, "NBDIST_SAME_HOST": "1"}
    if mode != "token":
        env.update(pki)
    if mode == "tls, no same-host":
        env["NBDIST_SAME_HOST"] = "0"
    return env


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="timed window per run")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before it")
    p.add_argument("--repeats", type=int, default=3, help="rounds of every mode")
    p.add_argument("--configs", default="1ps1w,1ps2w", help="subset of 1ps1w,1ps2w")
    args = p.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    rates: dict = {(m, c): [] for m in MODES for c in configs}
    cpus: dict = {(m, c): [] for m in MODES for c in configs}
    saved = {k: os.environ.get(k) for k in
             ("NBDIST_TOKEN", "NBDIST_SAME_HOST", "NBDIST_TLS_CA",
              "NBDIST_TLS_CERT", "NBDIST_TLS_KEY")}
    with tempfile.TemporaryDirectory(prefix="nbdist-bench-tls-") as d:
        pki = write_pki(d)
        try:
            for r in range(args.repeats):
                for config in configs:
                    for mode in MODES:
                        for k in saved:
                            os.environ.pop(k, None)
                        os.environ.update(mode_env(mode, pki))
                        rate, cpu = run_once("nbdist", config, args.seconds,
                                             args.warmup)
                        rates[(mode, config)].append(rate)
                        cpus[(mode, config)].append(sum(cpu.values()))
                        print(f"round {r + 1} {config} {mode}: {rate:.1f} steps/s, "
                              f"{sum(cpu.values()):.2f} CPU ms/step",
                              file=sys.stderr, flush=True)
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
    print(f"\nmedian of {args.repeats} rounds (window {args.seconds:g} s): global "
          "steps/s, and CPU ms per global step of all tasks (in brackets)\n")
    print(f"| config | {' | '.join(MODES)} | tls / token (steps/s) |")
    print("|---" * (len(MODES) + 2) + "|")
    for config in configs:
        med = {m: statistics.median(rates[(m, config)]) for m in MODES}
        cpu = {m: statistics.median(cpus[(m, config)]) for m in MODES}
        cells = " | ".join(f"{med[m]:.1f} ({cpu[m]:.1f} ms)" for m in MODES)
        print(f"| {LABELS[config]} | {cells} | {med['tls'] / med['token']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
