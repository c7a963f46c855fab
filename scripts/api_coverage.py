"""The share of TF1's public names that ``nbdist.compat.v1`` has, by namespace.

Reads ``scripts/data/tf1_public_names.json`` (written once from TensorFlow by
``scripts/list_tf1_names.py``; TensorFlow is not imported here) and looks each
name up with ``getattr`` on ``nbdist.compat.v1`` and its nested namespaces.

    python scripts/api_coverage.py                 # the table
    python scripts/api_coverage.py --missing nn    # names nd.compat.v1.nn lacks
    python scripts/api_coverage.py --excluded      # names left out, and why

The overall figure counts the namespaces issue 34 lists (``listed`` in the
JSON); the others are reported below it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "tf1_public_names.json"


def _namespace(root, path: str):
    obj = root
    for part in filter(None, path.split(".")):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - a namespace that fails to load is absent
            return None
    return obj


def _has(obj, name: str) -> bool:
    if obj is None:
        return False
    try:
        getattr(obj, name)
    except Exception:  # noqa: BLE001 - any failure to produce the name is "missing"
        return False
    return True


def coverage(data: dict) -> dict[str, tuple[list[str], list[str]]]:
    """Namespace key -> (names nbdist has, names it lacks)."""
    import nbdist.compat.v1 as v1

    out = {}
    for key, ns in data["namespaces"].items():
        obj = _namespace(v1, ns["path"])
        has = [n for n in ns["names"] if _has(obj, n)]
        out[key] = (has, [n for n in ns["names"] if n not in set(has)])
    return out


def _pct(has: int, total: int) -> str:
    return f"{100.0 * has / total:5.1f}%" if total else "  -  "


def format_table(data: dict, result: dict) -> str:
    lines = [f"TF1 public names (TF {data['tensorflow_version']}'s tf.compat.v1) "
             "that nbdist.compat.v1 has", "",
             f"{'namespace':<22} {'has':>5} / {'total':<5} {'%':>6}"]
    for listed in (True, False):
        if not listed:
            lines += ["", "other TF1 namespaces (not in the overall figure):"]
        has_sum = total_sum = 0
        for key, ns in data["namespaces"].items():
            if ns["listed"] is not listed:
                continue
            has, missing = result[key]
            total = len(has) + len(missing)
            has_sum, total_sum = has_sum + len(has), total_sum + total
            lines.append(f"{key:<22} {len(has):>5} / {total:<5} "
                         f"{_pct(len(has), total):>6}")
        label = "overall" if listed else "others"
        lines.append(f"{label:<22} {has_sum:>5} / {total_sum:<5} "
                     f"{_pct(has_sum, total_sum):>6}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", metavar="NS",
                    help="list the names namespace NS lacks ('tf' = top level)")
    ap.add_argument("--excluded", action="store_true",
                    help="list the names left out of the count, with reasons")
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args(argv)
    data = json.loads(args.data.read_text())
    if args.excluded:
        reasons = {r["id"]: r["reason"] for r in data["rules"]}
        for key, ns in data["namespaces"].items():
            for item in ns["excluded"]:
                print(f"{key}.{item['name']}: {item['rule']} "
                      f"({reasons[item['rule']]})")
        return 0
    if args.missing is not None and args.missing not in data["namespaces"]:
        print(f"unknown namespace {args.missing!r}; one of: "
              f"{', '.join(data['namespaces'])}", file=sys.stderr)
        return 2
    result = coverage(data)
    if args.missing is not None:
        print("\n".join(result[args.missing][1]))
        return 0
    print(format_table(data, result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
