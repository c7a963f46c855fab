"""The committed generated modules match the .proto sources."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT

PROTO_DIR = ROOT / "protos" / "nbdist" / "proto"


def _load_gen_protos():
    path = ROOT / "scripts" / "gen_protos.py"
    spec = importlib.util.spec_from_file_location("_nbdist_gen_protos", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen_protos = _load_gen_protos()


def test_generated_modules_match_sources():
    pytest.importorskip(
        "grpc_tools.protoc",
        reason="grpcio-tools is not installed (it is in the `test` extra)",
    )
    try:
        gen_protos.check_grpcio_tools()
    except gen_protos.GeneratorError as exc:
        pytest.fail(str(exc))
    problems = gen_protos.differences()
    assert not problems, (
        "nbdist/proto/ is out of date with protos/; run "
        "`python scripts/gen_protos.py`:\n" + "\n".join(problems)
    )


def test_every_generated_message_module_imports():
    names = sorted(p.stem for p in (ROOT / "nbdist" / "proto").glob("*_pb2.py"))
    assert len(names) == len(list(PROTO_DIR.glob("*.proto")))
    for name in names:
        importlib.import_module(f"nbdist.proto.{name}")


def _service_files() -> list[Path]:
    return [
        p
        for p in sorted(PROTO_DIR.glob("*.proto"))
        if re.search(r"^\s*service\s+\w+", p.read_text("utf-8"), re.MULTILINE)
    ]


def test_service_files_are_the_expected_ones():
    names = {p.name for p in _service_files()}
    assert names == {"master_service.proto", "worker_service.proto",
                     "coordination_service.proto"}


@pytest.mark.parametrize("path", _service_files(), ids=lambda p: p.name)
def test_service_file_opens_with_prose_comment(path: Path):
    lines = path.read_text("utf-8").splitlines()
    block = []
    for line in lines:
        if not line.startswith("//"):
            break
        block.append(line[2:].strip())
    prose = [line for line in block if line]
    assert len(prose) >= 10, f"{path.name} must open with a prose comment block"
    words = " ".join(prose).split()
    assert len(words) >= 80, f"{path.name}: opening comment is too short"


@pytest.mark.parametrize("path", _service_files(), ids=lambda p: p.name)
def test_service_file_has_only_services(path: Path):
    text = path.read_text("utf-8")
    assert not re.search(r"^\s*(message|enum)\s", text, re.MULTILINE), (
        f"{path.name}: messages belong in the non-service .proto file"
    )


def test_check_reports_missing_extra_and_changed(tmp_path, monkeypatch):
    pytest.importorskip(
        "grpc_tools.protoc",
        reason="grpcio-tools is not installed (it is in the `test` extra)",
    )
    out = tmp_path / "proto"
    out.mkdir()
    for name, data in gen_protos.committed().items():
        (out / name).write_bytes(data)
    (out / "tensor_pb2.py").write_bytes(b"# edited\n")
    (out / "types_pb2.pyi").unlink()
    (out / "stale_pb2.py").write_bytes(b"")
    monkeypatch.setattr(gen_protos, "OUT_DIR", out)
    assert gen_protos.differences() == [
        "extra (no .proto source): nbdist/proto/stale_pb2.py",
        "differs: nbdist/proto/tensor_pb2.py",
        "missing: nbdist/proto/types_pb2.pyi",
    ]
