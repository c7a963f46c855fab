#!/usr/bin/env python3
"""Coverage-guided fuzzing of nbdist's decoders with atheris, on demand.

    pip install atheris        # (a wheel for CPython 3.11 on x86-64 Linux)
    PYTHONPATH=$PWD python scripts/fuzz.py --minutes 3            # every decoder
    PYTHONPATH=$PWD python scripts/fuzz.py --minutes 1 wire graphdef
    PYTHONPATH=$PWD python scripts/fuzz.py --structured --minutes 1  # protobufs

The decoders and their seeds are ``tests/fuzz/targets.py``'s (the same the
hypothesis tests mutate). Each decoder runs in a process of its own for
``--minutes`` under libFuzzer (its seeds as the corpus; an input taking more
than ``--timeout`` seconds is a hang, more than ``--rss-mb`` a memory
finding). An input the decoder neither decodes nor refuses with its
documented error is a finding: its exception and the place it was raised are
printed once, and the input is written to ``--out``/<decoder>/. The table at
the end gives, per decoder, the inputs run and the findings.

``--structured`` fuzzes the decoders that read one protobuf message (a
``Target.message``: the gRPC request, GraphDef, Example) through
``tests/fuzz/proto_mutator.py`` instead of libFuzzer's byte mutations: every
input is a well-formed message of the decoder's type, changed field by field,
so the run spends its time behind protobuf's parser. Without named decoders it
runs those only; a named decoder that reads no message is fuzzed bytewise.

Exit status: 1 when any decoder had a finding (or its process died), else 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUZZ_DIR = ROOT / "tests" / "fuzz"


def _where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    last = frames[-1] if frames else None
    return f"{last.filename}:{last.lineno}" if last else "?"


def run_target(name: str, seconds: int, timeout: int, rss_mb: int, out: Path,
               structured: bool = False) -> None:
    """The child: fuzzes one decoder; one JSON line per new finding in
    ``out``/<decoder>/findings.jsonl (libFuzzer closes the child's stdout)."""
    import atheris

    sys.path.insert(0, str(FUZZ_DIR))
    with atheris.instrument_imports(include=["nbdist"]):
        import targets
        target = targets.TARGETS[name]
        for seed in target.seeds():  # load what the decoder imports, instrumented
            target.feed(seed)
    corpus = Path(tempfile.mkdtemp(prefix=f"nbdist-fuzz-{name}-"))
    for i, seed in enumerate(target.seeds()):
        (corpus / f"seed{i}").write_bytes(seed)
    found: set = set()
    (out / name).mkdir(parents=True, exist_ok=True)
    log = (out / name / "findings.jsonl").open("a")

    def one_input(data: bytes) -> None:
        try:
            target.feed(data)
        except Exception as e:  # noqa: BLE001 - an undocumented error: a finding
            key = (type(e).__name__, _where(e))
            if key not in found:
                found.add(key)
                path = out / name / hashlib.sha1(data).hexdigest()[:16]
                path.write_bytes(data)
                log.write(json.dumps({"finding": f"{key[0]}: {str(e)[:200]}",
                                      "at": key[1], "input": str(path)}) + "\n")
                log.flush()

    extra = {}
    if structured and target.message is not None:
        from proto_mutator import ProtoMutator

        # atheris.Mutate is looked up at each call: atheris binds the working
        # one when Fuzz() starts (the one there now only refuses).
        extra["custom_mutator"] = ProtoMutator(
            target.message(), target.seeds(), lambda d, n: atheris.Mutate(d, n))
    atheris.Setup([sys.argv[0], str(corpus), f"-max_total_time={seconds}",
                   f"-timeout={timeout}", f"-rss_limit_mb={rss_mb}",
                   "-print_final_stats=1", "-close_fd_mask=1"], one_input, **extra)
    atheris.Fuzz()


def _fuzz(name: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--minutes", str(args.minutes),
           "--timeout", str(args.timeout), "--rss-mb", str(args.rss_mb),
           "--out", str(args.out)] + (["--structured"] if args.structured else [])
    log = args.out / name / "findings.jsonl"
    log.unlink(missing_ok=True)
    done = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=args.minutes * 60 + 300)
    findings = [json.loads(line) for line in log.read_text().splitlines()] \
        if log.exists() else []
    runs = re.search(r"stat::number_of_executed_units:\s*(\d+)", done.stderr)
    crashed = re.search(r"==\d+== ERROR: libFuzzer: (.*)", done.stderr)
    if crashed:  # a hang, a memory blow-up or a crash of the process itself
        findings.append({"finding": f"libFuzzer: {crashed.group(1)}",
                         "at": "", "input": _artifact(done.stderr)})
    return {"name": name, "runs": int(runs.group(1)) if runs else 0,
            "findings": findings, "code": done.returncode}


def _artifact(stderr: str) -> str:
    m = re.search(r"Test unit written to (\S+)", stderr)
    return m.group(1) if m else ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="*", help="decoders (default: all)")
    parser.add_argument("--minutes", type=float, default=1.0, help="per decoder")
    parser.add_argument("--timeout", type=int, default=10, help="s per input")
    parser.add_argument("--rss-mb", type=int, default=2048)
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    parser.add_argument("--structured", action="store_true",
                        help="protobuf decoders: field-level mutations of messages")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_target(args.child, max(1, int(args.minutes * 60)), args.timeout,
                   args.rss_mb, args.out, args.structured)
        return 0
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris is not installed: pip install atheris", file=sys.stderr)
        return 2
    sys.path.insert(0, str(FUZZ_DIR))
    import targets

    names = args.targets or sorted(
        n for n, t in targets.TARGETS.items()
        if not args.structured or t.message is not None)
    env_note = os.environ.get("PYTHONPATH", "")
    print(f"fuzzing {', '.join(names)} for {args.minutes:g} min each "
          f"(PYTHONPATH={env_note or '-'})", flush=True)
    results = []
    for name in names:
        r = _fuzz(name, args)
        results.append(r)
        mode = "messages" if args.structured and targets.TARGETS[name].message \
            else "bytes"
        print(f"{name:18} {mode:9} {r['runs']:>9} inputs  "
              f"{len(r['findings'])} findings", flush=True)
        for f in r["findings"]:
            print(f"    {f['finding']}  at {f['at']}  ({f['input']})", flush=True)
    return 1 if any(r["findings"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
