"""Write ``scripts/data/tf1_public_names.json``: TF1's public names by namespace.

Run once, in a virtualenv with TensorFlow 2.21 (never in the project's own):

    pip install --no-deps --target /tmp/tfk tf_keras==2.21.0
    TF_USE_LEGACY_KERAS=1 PYTHONPATH=/tmp/tfk /work/tfvenv/bin/python \\
        scripts/list_tf1_names.py --estimator-golden tensorflow.estimator.pbtxt

The names are TensorFlow's facts: every public attribute of each
``tf.compat.v1`` namespace in TF 2.21. ``tf.compat.v1.layers`` and
``tf.compat.v1.nn.rnn_cell`` are Keras-backed in TF 2.21 and need ``tf_keras``
(with ``TF_USE_LEGACY_KERAS=1``); ``tf.compat.v1.estimator`` was removed in
TF 2.16, so its names come from TF's v1 API golden file
(``tensorflow/tools/api/golden/v1/tensorflow.estimator.pbtxt``), given by path.
The JSON records where each namespace's list came from.

A name left out is left out by one of the explicit ``EXCLUDE_RULES`` below
(eager-only, ragged, quantization, TPU, native library, ...); the JSON lists
every excluded name with its rule and reason. After a rule is added,
``--reapply-rules`` re-partitions the committed JSON without TensorFlow. Attributes that are modules are
namespaces, not names: the ones listed in ``NAMESPACES`` are counted on their
own. ``scripts/api_coverage.py`` reads the JSON without TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import types
from pathlib import Path

# (namespace, listed in issue 34's target). "" is the top level (``tf.``).
NAMESPACES = [
    ("", True), ("train", True), ("nn", True), ("losses", True),
    ("metrics", True), ("image", True), ("sparse", True), ("io", True),
    ("summary", True), ("saved_model", True), ("math", True), ("linalg", True),
    ("random", True), ("strings", True), ("errors", True), ("data", True),
    ("layers", True), ("nn.rnn_cell", True), ("feature_column", True),
    ("estimator", True),
    # TF1 namespaces programs also use; reported, not part of the target.
    ("gfile", False), ("python_io", False), ("logging", False),
    ("initializers", False), ("debugging", False), ("dtypes", False),
    ("lookup", False), ("sets", False), ("queue", False), ("distribute", False),
    ("graph_util", False), ("manip", False), ("app", False), ("test", False),
    ("bitwise", False), ("spectral", False), ("signal", False),
    ("data.experimental", False), ("train.experimental", False),
]

# Each rule: (id, reason, predicate(namespace, name) -> bool).
_QUANT = re.compile(r"(^|_)(de)?quantiz|fake_quant|^q(u?int)\d+$|QUANTIZED")
_TPU = re.compile(r"(^|_)tpu(_|$)|^TPU", re.IGNORECASE)
_NATIVE = {
    "load_op_library", "load_library", "load_file_system_library",
    "COMPILER_VERSION", "CXX11_ABI_FLAG", "CXX_VERSION", "MONOLITHIC_BUILD",
    "get_include", "get_lib", "get_compile_flags", "get_link_flags",
}
# Only meaningful with eager execution: iterating a dataset as NumPy values in
# Python, and saving trackable objects, which TF1 documents as needing eager.
_EAGER = {("data", "NumpyIterator"), ("saved_model", "save")}
# In TF 2.21's tf.compat.v1 but never in TF1: JPEG XL's bitstream was frozen in
# December 2020, over a year after TF 1.15 (October 2019).
_POST_TF1 = {("io", "decode_jxl"), ("image", "decode_jxl")}
# Internal ops of the SDCA linear solver (contrib's SDCAOptimizer, the removed
# linear estimators); no TF1 program calls them itself.
_SDCA = re.compile(r"^sdca_")
_BFLOAT16 = {"bfloat16", "to_bfloat16"}

EXCLUDE_RULES = [
    ("ragged", "ragged tensors are TF2-era and outside nbdist's scope",
     lambda ns, n: "ragged" in n.lower()),
    ("quantization", "quantized dtypes and fake-quant ops target integer "
     "inference kernels nbdist does not have",
     lambda ns, n: bool(_QUANT.search(n))),
    ("tpu", "TPU-only API", lambda ns, n: bool(_TPU.search(n))),
    ("native-library", "loads native op libraries or reports C++ build facts",
     lambda ns, n: n in _NATIVE),
    ("eager-only", "only meaningful with eager execution, which nbdist does "
     "not have (TF1 graph mode)", lambda ns, n: (ns, n) in _EAGER),
    ("post-tf1", "added to TensorFlow after TF 1.15, never part of TF1",
     lambda ns, n: (ns, n) in _POST_TF1),
    ("sdca-solver", "the raw ops of TF's SDCA linear solver (sdca_optimizer, "
     "sdca_fprint, sdca_shrink_l1), used only inside contrib's SDCAOptimizer",
     lambda ns, n: ns == "train" and bool(_SDCA.match(n))),
    ("bfloat16", "NumPy has no bfloat16 dtype (it needs the ml_dtypes library, "
     "not a dependency); nbdist's kernels are NumPy's",
     lambda ns, n: n in _BFLOAT16),
    ("lmdb", "reads LMDB databases through the native LMDB library (python "
     "lmdb is not a dependency)", lambda ns, n: n == "LMDBReader"),
]


def _is_module(obj) -> bool:
    return isinstance(obj, types.ModuleType) or type(obj).__name__ in (
        "TFModuleWrapper", "KerasLazyLoader", "LazyLoader")


def _tf_names(v1, ns: str) -> list[str]:
    obj = v1
    for part in filter(None, ns.split(".")):
        obj = getattr(obj, part)
    return sorted(n for n in dir(obj) if not n.startswith("_")
                  and not _is_module(getattr(obj, n, None)))


def _golden_names(path: Path) -> list[str]:
    """Members of a v1 API golden ``.pbtxt``, modules left out."""
    text = path.read_text()
    blocks = re.findall(r"(member(?:_method)?) \{\s*name: \"([^\"]+)\"\s*"
                        r"(?:mtype: \"([^\"]*)\")?", text)
    return sorted(n for _, n, mtype in blocks if "module" not in (mtype or ""))


def _partition(ns: str, names) -> tuple[list[str], list[dict]]:
    kept, excluded = [], []
    for name in sorted(names):
        rule = next((r for r in EXCLUDE_RULES if r[2](ns, name)), None)
        if rule is None:
            kept.append(name)
        else:
            excluded.append({"name": name, "rule": rule[0]})
    return kept, excluded


def reapply_rules(path: Path) -> None:
    """Re-partitions the names of an existing JSON by today's
    ``EXCLUDE_RULES`` (TensorFlow not needed: the names are already TF's)."""
    out = json.loads(path.read_text())
    out["rules"] = [{"id": rid, "reason": why} for rid, why, _ in EXCLUDE_RULES]
    for ns in out["namespaces"].values():
        names = ns["names"] + [e["name"] for e in ns["excluded"]]
        ns["names"], ns["excluded"] = _partition(ns["path"], names)
    path.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reapply-rules", action="store_true",
                    help="re-partition --out's names by EXCLUDE_RULES, no TF needed")
    ap.add_argument("--estimator-golden", type=Path,
                    help="TF's golden/v1/tensorflow.estimator.pbtxt")
    ap.add_argument("--estimator-golden-source", default=(
        "github:tensorflow/tensorflow@2f2ab3d916d64762e1a369b0dc8b469bd6f80ae3:"
        "tensorflow/tools/api/golden/v1/tensorflow.estimator.pbtxt"))
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data"
                    / "tf1_public_names.json")
    args = ap.parse_args(argv)
    if args.reapply_rules:
        reapply_rules(args.out)
        print(f"re-applied {len(EXCLUDE_RULES)} rules to {args.out}")
        return 0
    if args.estimator_golden is None:
        ap.error("--estimator-golden is required")
    if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        sys.exit("set TF_USE_LEGACY_KERAS=1 (tf.compat.v1.layers needs tf_keras)")
    import tensorflow as tf

    v1 = tf.compat.v1
    out = {"tensorflow_version": tf.__version__, "generator": "scripts/list_tf1_names.py",
           "notes": [
               "A namespace's attributes that are modules are not names: they are "
               "namespaces, counted on their own where listed here.",
               "Names starting with '_' are private and left out.",
               "'listed': the namespaces of issue 34's target; the others are "
               "reported apart."],
           "rules": [{"id": rid, "reason": why} for rid, why, _ in EXCLUDE_RULES],
           "namespaces": {}}
    for ns, listed in NAMESPACES:
        if ns == "estimator":
            names = _golden_names(args.estimator_golden)
            source = args.estimator_golden_source + (
                " (tf.compat.v1.estimator was removed in TF 2.16)")
        else:
            names = _tf_names(v1, ns)
            source = f"dir(tf.compat.v1{'.' + ns if ns else ''}) in TF {tf.__version__}"
            if ns in ("layers", "nn.rnn_cell"):
                source += " with tf_keras 2.21.0 (TF_USE_LEGACY_KERAS=1)"
        kept, excluded = _partition(ns, names)
        out["namespaces"][ns or "tf"] = {
            "path": ns, "listed": listed, "source": source,
            "names": kept, "excluded": excluded}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")
    total = sum(len(v["names"]) for v in out["namespaces"].values())
    print(f"wrote {args.out}: {total} names in {len(out['namespaces'])} namespaces")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
