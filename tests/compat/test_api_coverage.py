"""``scripts/api_coverage.py``: TF1's public names that ``nd.compat.v1`` has.

* The committed names list is well formed: every namespace says where its names
  came from, every excluded name names a rule that has a reason.
* A name counts as present exactly when ``getattr`` on ``nd.compat.v1`` (nested
  for ``nn.rnn_cell``) gives it; the table's totals are the list's lengths.
* ``--missing NS`` lists the absent names; an unknown namespace is an error.
This checks the script works, not how much of TF1 nbdist has.
"""

from __future__ import annotations

import importlib.util
import json

import helpers
import pytest

import nbdist as nd

SCRIPT = helpers.ROOT / "scripts" / "api_coverage.py"


@pytest.fixture(scope="module")
def api_coverage():
    spec = importlib.util.spec_from_file_location("api_coverage", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_names_list_records_sources_and_exclusion_reasons(api_coverage):
    data = json.loads(api_coverage.DATA.read_text())
    rules = {r["id"] for r in data["rules"] if r["reason"]}
    assert {"eager-only", "ragged", "quantization", "tpu", "native-library"} <= rules
    for key in ("tf", "train", "nn", "math", "layers", "nn.rnn_cell", "estimator"):
        ns = data["namespaces"][key]
        assert ns["listed"] and ns["source"] and ns["names"]
        assert all(item["rule"] in rules for item in ns["excluded"])
    excluded = {i["name"] for i in data["namespaces"]["tf"]["excluded"]}
    assert {"load_op_library", "quantize", "RaggedTensor"} <= excluded
    assert "Session" in data["namespaces"]["tf"]["names"]


def test_present_exactly_when_getattr_gives_it(api_coverage, tmp_path, capsys):
    data = {"tensorflow_version": "x", "rules": [], "namespaces": {
        "tf": {"path": "", "listed": True, "names": ["Session", "no_such_tf_name"],
               "excluded": []},
        "nn": {"path": "nn", "listed": True, "names": ["relu", "no_such_nn_name"],
               "excluded": []},
        "gone": {"path": "no_such_namespace", "listed": False, "names": ["x"],
                 "excluded": []}}}
    path = tmp_path / "names.json"
    path.write_text(json.dumps(data))
    assert api_coverage.main(["--data", str(path)]) == 0
    rows = {line.split()[0]: line.split()[1:4]
            for line in capsys.readouterr().out.splitlines() if " / " in line}
    assert rows["tf"] == ["1", "/", "2"] and rows["nn"] == ["1", "/", "2"]
    assert rows["overall"] == ["2", "/", "4"] and rows["gone"] == ["0", "/", "1"]
    assert api_coverage.main(["--data", str(path), "--missing", "nn"]) == 0
    assert capsys.readouterr().out.split() == ["no_such_nn_name"]
    assert api_coverage.main(["--data", str(path), "--missing", "math"]) == 2


def test_committed_list_table_and_missing(api_coverage, capsys):
    data = json.loads(api_coverage.DATA.read_text())
    result = api_coverage.coverage(data)
    for key, ns in data["namespaces"].items():
        has, missing = result[key]
        assert sorted(has + missing) == sorted(ns["names"])
    assert "Session" in result["tf"][0] and "relu" in result["nn"][0]
    assert api_coverage.main(["--missing", "tf"]) == 0
    missing = capsys.readouterr().out.split()
    assert missing == result["tf"][1]
    assert all(not hasattr(nd.compat.v1, name) for name in missing)


def test_names_list_follows_the_generators_rules(tmp_path):
    # The committed partition is what `list_tf1_names.py --reapply-rules` gives
    # (so a rule added there is applied here), and a name a rule covers moves.
    spec = importlib.util.spec_from_file_location(
        "list_tf1_names", helpers.ROOT / "scripts" / "list_tf1_names.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    committed = helpers.ROOT / "scripts" / "data" / "tf1_public_names.json"
    copy = tmp_path / "names.json"
    copy.write_text(committed.read_text())
    gen.reapply_rules(copy)
    assert json.loads(copy.read_text()) == json.loads(committed.read_text())
    data = json.loads(committed.read_text())
    excluded = {i["name"]: i["rule"] for i in data["namespaces"]["train"]["excluded"]}
    assert excluded["sdca_optimizer"] == "sdca-solver"
