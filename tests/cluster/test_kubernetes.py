"""deploy/kubernetes: every pod of the rendered manifests would run a server that
resolves the same cluster and its own task, at its own headless-Service name.

No Kubernetes here: each pod of each indexed Job is derived as the Job
controller and the kubelet would (host name ``<job>-<index>``, the completion
index annotation, ``$(VAR)`` expansion in env order, Secret references), and
its environment is handed to ``TFConfigClusterResolver`` and to
``nbdist-server``'s own flag and ``TF_CONFIG`` handling.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml
from helpers import ROOT

from nbdist import server
from nbdist.cluster.resolvers import TFConfigClusterResolver
from nbdist.runtime.cluster_spec import ClusterSpec

DEPLOY = ROOT / "deploy" / "kubernetes"
EXAMPLE = DEPLOY / "nbdist-1ps-2workers.yaml"
TOKEN = "s3cret-token"


def _load_render():
    spec = importlib.util.spec_from_file_location("nbdist_k8s_render",
                                                  DEPLOY / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = _load_render()


def _rendered(capsys, *argv):
    """The manifests ``render.py`` prints, read back as ``kubectl`` would."""
    assert render.main(list(argv)) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']+)'\]")


def _expand(value, env):
    """Kubernetes' ``$(VAR)``: earlier variables only; ``$$`` is ``$``; an
    unknown reference stays as written."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _REF.sub(sub, value)


def _pods(docs, secrets):
    """Every pod the indexed Jobs would run: (Job metadata, index, pod template,
    container, the container's environment)."""
    for job in (d for d in docs if d["kind"] == "Job"):
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed", job["metadata"]["name"]
        assert spec["parallelism"] == spec["completions"]  # all tasks run at once
        template = spec["template"]
        for index in range(spec["completions"]):
            meta = {"annotations": {render.INDEX_ANNOTATION: str(index)},
                    "labels": template["metadata"]["labels"]}
            (container,) = template["spec"]["containers"]
            env = {}
            for var in container["env"]:
                if "value" in var:
                    env[var["name"]] = _expand(var["value"], env)
                elif "fieldRef" in var["valueFrom"]:
                    path = var["valueFrom"]["fieldRef"]["fieldPath"]
                    where = _FIELD.fullmatch(path)
                    assert where, f"unsupported fieldPath {path}"
                    # A missing annotation or label reads as "".
                    env[var["name"]] = meta[where.group(1)].get(where.group(2), "")
                else:
                    ref = var["valueFrom"]["secretKeyRef"]
                    env[var["name"]] = secrets[ref["name"], ref["key"]]
            env["JOB_COMPLETION_INDEX"] = str(index)  # the Job controller appends it
            yield job["metadata"], index, template, container, env


def _check(docs, monkeypatch, *, name="nbdist", namespace="default",
           counts=None, port=2222, secrets=None):
    """Checks every pod; returns the one cluster they all resolve."""
    counts = counts or {"ps": 1, "worker": 2}
    secrets = secrets or {(f"{name}-token", "token"): TOKEN}
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    suffix = f"{namespace}.svc"
    expected = {
        job: [f"{name}-{job}-{i}.{name}-{job}.{suffix}:{port}" for i in range(n)]
        for job, n in counts.items()
    }
    seen = []
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for meta, index, template, container, env in _pods(docs, secrets):
        pod = template["spec"]
        own_type = meta["name"].removeprefix(f"{name}-")
        # DNS: <host>.<subdomain>.<namespace>.svc, the subdomain a headless
        # Service of this namespace that selects this pod and serves its port.
        service = services[pod["subdomain"]]
        assert service["metadata"]["namespace"] == meta["namespace"] == namespace
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= template["metadata"][
            "labels"].items()
        (svc_port,) = service["spec"]["ports"]
        dns = f"{meta['name']}-{index}.{pod['subdomain']}.{namespace}.svc"
        with monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            resolver = TFConfigClusterResolver()
            spec = resolver.cluster_spec().as_dict()
            assert (resolver.task_type, resolver.task_id) == (own_type, index)
            assert spec == expected
            assert spec[own_type][index] == f"{dns}:{port}"
            # The server command, parsed and resolved as nbdist-server does.
            command = container["command"]
            assert command[:3] == ["python", "-m", "nbdist.server"]
            parser = server._parser()
            args = parser.parse_args(command[3:])
            assert args.bind == "0.0.0.0"
            cluster, job, task = server._cluster(args, parser)
            assert (cluster.as_dict(), job, task) == (expected, own_type, index)
            assert env["NBDIST_TOKEN"] == TOKEN
        # It listens on its task's port: the one peers dial through the Service.
        (container_port,) = container["ports"]
        assert container_port["containerPort"] == svc_port["targetPort"] == port
        assert svc_port["port"] == port
        seen.append((own_type, index))
    assert sorted(seen) == sorted((j, i) for j, n in counts.items() for i in range(n))
    return expected


def test_one_ps_two_workers_resolve_one_cluster_and_their_own_tasks(
        capsys, monkeypatch):
    docs = _rendered(capsys, "--ps", "1", "--workers", "2")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Service", "nbdist-ps"), ("Service", "nbdist-worker"),
        ("Job", "nbdist-ps"), ("Job", "nbdist-worker")]
    expected = _check(docs, monkeypatch)
    assert render.main(["--ps", "1", "--workers", "2", "--cluster-spec"]) == 0
    printed = capsys.readouterr().out.strip()
    assert ClusterSpec.from_string(printed).as_dict() == expected


def test_committed_example_is_the_rendered_one(capsys):
    assert render.main(["--ps", "1", "--workers", "2"]) == 0
    assert EXAMPLE.read_text() == capsys.readouterr().out, (
        "regenerate it: python deploy/kubernetes/render.py --ps 1 --workers 2 > "
        f"{EXAMPLE.relative_to(DEPLOY.parent.parent)}")


def test_chief_namespace_port_and_tls(capsys, monkeypatch):
    docs = _rendered(capsys, "--name", "mnist", "--chief", "1", "--ps", "2",
                     "--workers", "3", "--namespace", "ml", "--port", "2345",
                     "--token-secret", "tok", "--tls-secret", "mnist-tls")
    _check(docs, monkeypatch, name="mnist", namespace="ml", port=2345,
           counts={"chief": 1, "ps": 2, "worker": 3},
           secrets={("tok", "token"): TOKEN})
    for job in (d for d in docs if d["kind"] == "Job"):
        pod = job["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        (mount,) = container["volumeMounts"]
        (volume,) = pod["volumes"]
        assert (volume["name"], volume["secret"]["secretName"]) == (
            mount["name"], "mnist-tls")
        env = {v["name"]: v.get("value") for v in container["env"]}
        assert [env[f"NBDIST_TLS_{k}"] for k in ("CERT", "KEY", "CA")] == [
            f"{mount['mountPath']}/{f}" for f in ("tls.crt", "tls.key", "ca.crt")]


def test_cluster_domain_is_appended(capsys):
    docs = _rendered(capsys, "--cluster-domain", "cluster.local")
    env = {v["name"]: v.get("value") for v in _job_env(docs, "nbdist-ps")}
    tf_config = json.loads(env["TF_CONFIG"].replace("$(NBDIST_TASK_INDEX)", "0"))
    assert tf_config["cluster"]["ps"] == [
        "nbdist-ps-0.nbdist-ps.default.svc.cluster.local:2222"]
    assert tf_config["environment"] == "cloud"  # as TFJob sets it


def _hardwire_index(docs):
    for var in _job_env(docs, "nbdist-worker"):
        if var["name"] == "TF_CONFIG":
            var["value"] = var["value"].replace("$(NBDIST_TASK_INDEX)", "0")


def _wrong_annotation(docs):
    for var in _job_env(docs, "nbdist-worker"):
        if var["name"] == "NBDIST_TASK_INDEX":
            var["valueFrom"]["fieldRef"]["fieldPath"] = (
                "metadata.annotations['batch.kubernetes.io/job-index']")


def _index_after_tf_config(docs):
    env = _job_env(docs, "nbdist-worker")
    env[0], env[1] = env[1], env[0]


def _wrong_subdomain(docs):
    _job(docs, "nbdist-worker")["spec"]["template"]["spec"]["subdomain"] = "nbdist-ps"


def _wrong_service_port(docs):
    for d in docs:
        if d["kind"] == "Service":
            d["spec"]["ports"][0]["targetPort"] = 2223


def _job(docs, name):
    (job,) = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == name]
    return job


def _job_env(docs, name):
    return _job(docs, name)["spec"]["template"]["spec"]["containers"][0]["env"]


@pytest.mark.parametrize(
    ("break_it", "error"),
    [
        (_hardwire_index, AssertionError),
        # The index reads as "" or stays "$(NBDIST_TASK_INDEX)": not JSON.
        (_wrong_annotation, ValueError),
        (_index_after_tf_config, ValueError),
        (_wrong_subdomain, AssertionError),
        (_wrong_service_port, AssertionError),
    ],
)
def test_the_check_fails_on_wrong_wiring(capsys, monkeypatch, break_it, error):
    docs = _rendered(capsys)
    _check(docs, monkeypatch)
    break_it(docs)
    with pytest.raises(error):
        _check(docs, monkeypatch)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "0"], "at least one worker"),
        (["--ps", "-1"], "job 'ps': expected a task count >= 0, got -1"),
        (["--chief", "2"], "job 'chief': expected 0 or 1 task, got 2"),
        (["--name", "My_Cluster"], "name 'My_Cluster' must be a DNS label"),
        (["--name", "n" * 55], "the host name of worker task 1 would pass 63"),
        (["--port", "70000"], "port: expected 1..65535, got 70000"),
    ],
)
def test_bad_input_is_one_clear_line(capsys, argv, message):
    assert render.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
