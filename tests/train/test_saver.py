"""Saver: round trips, atomic saves, max_to_keep, the NumPy-readable format,
restore errors, the checkpoint state file, meta graphs."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nbdist as nd
from nbdist.train import saver as saver_mod
from nbdist.train import checkpoint_management, npz_format


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield
    nd.reset_default_graph()  # leave no ps-placed ops to later test files


W0 = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
STRINGS = np.array([b"alpha", b"", b"with\x00nul\x00", "\u00e9t\u00e9".encode()],
                   dtype=object)


def _model(g, scope=""):
    """Variables of several dtypes, with a global step."""
    with g.as_default(), nd.variable_scope(scope) if scope else _null():
        w = nd.Variable(W0, name="layer/w")
        b = nd.Variable(np.array([1.5, -2.0], np.float64), name="layer/b")
        h = nd.Variable(np.array([0.5, 0.25], np.float16), name="h")
        flags = nd.Variable(np.array([True, False]), name="flags")
        words = nd.Variable(STRINGS, name="words")
        gs = nd.train.get_or_create_global_step()
    return {"layer/w": w, "layer/b": b, "h": h, "flags": flags, "words": words,
            "global_step": gs}


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def _values(sess, vs):
    return {k: sess.run(v) for k, v in vs.items()}


def _assert_same(a, b):
    assert set(a) == set(b)
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype, k
        assert x.shape == y.shape, k
        assert x.tolist() == y.tolist(), k


def _saved_state(tmp_path, steps=(1,), max_to_keep=5):
    g = nd.get_default_graph()
    vs = _model(g)
    with g.as_default():
        saver = nd.train.Saver(max_to_keep=max_to_keep)
        inc = vs["layer/w"].assign_add(np.ones((2, 3), np.float32))
        step = vs["global_step"].assign_add(1)
        init = nd.global_variables_initializer()
    sess = nd.Session(graph=g)
    sess.run(init)
    paths = []
    for s in steps:
        sess.run(step)
        assert int(sess.run(vs["global_step"])) == s
        paths.append(saver.save(sess, str(tmp_path / "model"), global_step=s))
        sess.run(inc)
    return g, vs, saver, sess, paths


def test_save_restore_round_trip_into_fresh_graph(tmp_path):
    _g, vs, _saver, sess, paths = _saved_state(tmp_path)
    assert paths == [str(tmp_path / "model-1")]
    sess.run(vs["layer/w"].assign(W0))  # what the checkpoint holds
    expected = _values(sess, vs)
    sess.close()

    g2 = nd.Graph()
    vs2 = _model(g2)
    with g2.as_default():
        saver2 = nd.train.Saver()
    with nd.Session(graph=g2) as s2:
        # nothing initialised: the restore is the initialisation
        saver2.restore(s2, nd.train.latest_checkpoint(str(tmp_path)))
        got = _values(s2, vs2)
    _assert_same(expected, got)
    assert got["words"].tolist() == STRINGS.tolist()  # NULs kept, bytes exact
    assert got["global_step"] == 1


def test_save_returns_prefix_and_writes_state_file(tmp_path):
    _, _, saver, sess, paths = _saved_state(tmp_path, steps=(1, 2))
    sess.close()
    assert paths == [str(tmp_path / "model-1"), str(tmp_path / "model-2")]
    assert saver.last_checkpoints == paths
    for p in paths:
        assert os.path.isfile(p + ".npz") and os.path.isfile(p + ".meta")
        assert nd.train.checkpoint_exists(p)
    assert not nd.train.checkpoint_exists(str(tmp_path / "model-3"))
    text = (tmp_path / "checkpoint").read_text()
    assert f'model_checkpoint_path: "{paths[1]}"' in text
    assert text.count("all_model_checkpoint_paths:") == 2
    ckpt = nd.train.get_checkpoint_state(str(tmp_path))
    assert ckpt.model_checkpoint_path == paths[1]
    assert ckpt.all_model_checkpoint_paths == paths
    assert nd.train.latest_checkpoint(str(tmp_path)) == paths[1]


def test_relative_save_dir_writes_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("ckpt")
    v = nd.Variable(1.0, name="v")
    saver = nd.train.Saver()
    with nd.Session() as s:
        s.run(v.initializer)
        assert saver.save(s, "ckpt/model", global_step=3) == "ckpt/model-3"
    text = (tmp_path / "ckpt" / "checkpoint").read_text()
    assert 'model_checkpoint_path: "model-3"' in text
    assert nd.train.latest_checkpoint("ckpt") == os.path.join("ckpt", "model-3")


def test_npz_loads_with_plain_numpy(tmp_path):
    _g, _vs, _saver, sess, paths = _saved_state(tmp_path)
    sess.close()
    with np.load(paths[0] + ".npz") as f:  # allow_pickle=False, NumPy's default
        assert set(f.files) == {"layer/w", "layer/b", "h", "flags", "words",
                                "words:lengths", "global_step"}
        np.testing.assert_array_equal(f["layer/w"], W0)
        assert f["layer/w"].dtype == np.float32
        assert f["layer/b"].dtype == np.float64
        assert f["h"].dtype == np.float16
        assert f["flags"].dtype == np.bool_
        assert f["global_step"].dtype == np.int64 and f["global_step"] == 1
        words, lengths = f["words"], f["words:lengths"]
        assert words.dtype.kind == "S"
        # the documented decoding: pad each item with NULs to its length
        decoded = [bytes(x).ljust(int(n), b"\x00") for x, n in zip(words, lengths)]
        assert decoded == STRINGS.tolist()


def _fail_halfway(monkeypatch):
    real = npz_format._write_npz

    def broken(fileobj, arrays):
        real(fileobj, arrays)
        fileobj.truncate(fileobj.tell() // 2)  # half a file on disk
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(npz_format, "_write_npz", broken)


def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    _g, vs, saver, sess, paths = _saved_state(tmp_path)
    before = sorted(os.listdir(tmp_path))
    sess.run(vs["global_step"].assign_add(1))
    _fail_halfway(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        saver.save(sess, str(tmp_path / "model"), global_step=2)
    # nothing new in the directory: no model-2 files, no temp files
    assert sorted(os.listdir(tmp_path)) == before
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))
    assert nd.train.latest_checkpoint(str(tmp_path)) == paths[0]
    assert saver.last_checkpoints == paths
    monkeypatch.undo()
    # the previous checkpoint still loads
    sess.run(vs["layer/w"].assign(np.zeros((2, 3), np.float32)))
    saver.restore(sess, nd.train.latest_checkpoint(str(tmp_path)))
    np.testing.assert_array_equal(sess.run(vs["layer/w"]), W0)
    assert sess.run(vs["global_step"]) == 1
    # and the next save works
    assert saver.save(sess, str(tmp_path / "model"), global_step=5).endswith("-5")
    assert nd.train.latest_checkpoint(str(tmp_path)).endswith("model-5")
    sess.close()


def test_crash_between_data_and_state_file(tmp_path, monkeypatch):
    _g, vs, saver, sess, paths = _saved_state(tmp_path)

    def crash(*a, **k):
        raise KeyboardInterrupt("killed before the state file was written")

    monkeypatch.setattr(saver_mod, "update_checkpoint_state", crash)
    with pytest.raises(KeyboardInterrupt):
        saver.save(sess, str(tmp_path / "model"), global_step=2)
    monkeypatch.undo()
    assert nd.train.latest_checkpoint(str(tmp_path)) == paths[0]
    sess.run(vs["layer/w"].assign(np.zeros((2, 3), np.float32)))
    saver.restore(sess, paths[0])
    np.testing.assert_array_equal(sess.run(vs["layer/w"]), W0)
    sess.close()


def test_crash_while_writing_state_file(tmp_path, monkeypatch):
    _g, _vs, saver, sess, paths = _saved_state(tmp_path)
    state_before = (tmp_path / "checkpoint").read_text()
    real = checkpoint_management._atomic_write

    def atomic_write(path, write_fn):
        if os.path.basename(path) == "checkpoint":
            def half(f):
                f.write(b'model_checkpoint_path: "mod')
                raise OSError("power cut (simulated)")

            return real(path, half)
        return real(path, write_fn)

    monkeypatch.setattr(checkpoint_management, "_atomic_write", atomic_write)
    with pytest.raises(OSError, match="power cut"):
        saver.save(sess, str(tmp_path / "model"), global_step=2)
    monkeypatch.undo()
    assert (tmp_path / "checkpoint").read_text() == state_before
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))
    assert nd.train.latest_checkpoint(str(tmp_path)) == paths[0]
    saver.restore(sess, paths[0])
    sess.close()


def test_max_to_keep_deletes_oldest(tmp_path):
    _, _, saver, sess, paths = _saved_state(tmp_path, steps=(1, 2, 3, 4),
                                            max_to_keep=2)
    sess.close()
    files = sorted(os.listdir(tmp_path))
    assert files == ["checkpoint", "model-3.meta", "model-3.npz", "model-4.meta",
                     "model-4.npz"]
    assert saver.last_checkpoints == paths[2:]
    ckpt = nd.train.get_checkpoint_state(str(tmp_path))
    assert ckpt.all_model_checkpoint_paths == paths[2:]
    assert ckpt.model_checkpoint_path == paths[3]


def test_max_to_keep_none_keeps_everything(tmp_path):
    _, _, _saver, sess, paths = _saved_state(tmp_path, steps=(1, 2, 3),
                                            max_to_keep=None)
    sess.close()
    for p in paths:
        assert nd.train.checkpoint_exists(p)


def test_recover_last_checkpoints(tmp_path):
    _, _, _, sess, paths = _saved_state(tmp_path, steps=(1, 2, 3), max_to_keep=2)
    with sess.graph.as_default():
        s2 = nd.train.Saver(max_to_keep=2)
    ckpt = nd.train.get_checkpoint_state(str(tmp_path))
    s2.recover_last_checkpoints(ckpt.all_model_checkpoint_paths)
    assert s2.last_checkpoints == paths[1:]
    s2.save(sess, str(tmp_path / "model"), global_step=4)
    assert not nd.train.checkpoint_exists(paths[1])
    assert s2.last_checkpoints == [paths[2], str(tmp_path / "model-4")]
    sess.close()


def _fresh(tmp_path, shape_w=(2, 3), names=("layer/w", "layer/b")):
    g = nd.Graph()
    with g.as_default():
        vs = {}
        if "layer/w" in names:
            vs["layer/w"] = nd.Variable(np.full(shape_w, 9, np.float32), name="layer/w")
        if "layer/b" in names:
            vs["layer/b"] = nd.Variable(np.array([9.0, 9.0]), name="layer/b")
        for n in names:
            if n not in vs:
                vs[n] = nd.Variable(np.float32(9), name=n)
        saver = nd.train.Saver()
        init = nd.global_variables_initializer()
    sess = nd.Session(graph=g)
    sess.run(init)
    return vs, saver, sess


def test_restore_missing_variable_names_it_and_changes_nothing(tmp_path):
    _, _, _, sess, paths = _saved_state(tmp_path)
    sess.close()
    vs, saver, s = _fresh(tmp_path, names=("layer/w", "layer/b", "extra/v"))
    before = _values(s, vs)
    with pytest.raises(nd.errors.NotFoundError, match="extra/v"):
        saver.restore(s, paths[0])
    _assert_same(before, _values(s, vs))
    s.close()


def test_restore_wrong_shape_names_it_and_changes_nothing(tmp_path):
    _, _, _, sess, paths = _saved_state(tmp_path)
    sess.close()
    # "layer/b" sorts first and would restore fine; "layer/w" is wrong
    vs, saver, s = _fresh(tmp_path, shape_w=(3, 2))
    before = _values(s, vs)
    with pytest.raises(nd.errors.InvalidArgumentError, match="layer/w") as e:
        saver.restore(s, paths[0])
    assert "[3,2]" in str(e.value) and "[2,3]" in str(e.value)
    _assert_same(before, _values(s, vs))
    s.close()


def test_restore_wrong_dtype_names_it(tmp_path):
    _, _, _, sess, paths = _saved_state(tmp_path)
    sess.close()
    g = nd.Graph()
    with g.as_default():
        b = nd.Variable(np.zeros(2, np.float32), name="layer/b")  # saved as float64
        saver = nd.train.Saver([b])
    with nd.Session(graph=g) as s:
        s.run(b.initializer)
        with pytest.raises(nd.errors.InvalidArgumentError, match="layer/b"):
            saver.restore(s, paths[0])
        np.testing.assert_array_equal(s.run(b), [0, 0])


def test_restore_with_reshape(tmp_path):
    _, _, _, sess, paths = _saved_state(tmp_path)
    sess.close()
    g = nd.Graph()
    with g.as_default():
        w = nd.Variable(np.zeros((3, 2), np.float32), name="layer/w")
        saver = nd.train.Saver([w], reshape=True)
    with nd.Session(graph=g) as s:
        saver.restore(s, paths[0])
        np.testing.assert_array_equal(s.run(w), W0.reshape(3, 2))


def test_restore_invalid_path(tmp_path):
    v = nd.Variable(1.0, name="v")
    saver = nd.train.Saver()
    with nd.Session() as s:
        with pytest.raises(ValueError, match="not a valid checkpoint"):
            saver.restore(s, str(tmp_path / "nope"))
        with pytest.raises(ValueError, match="None"):
            saver.restore(s, None)
        (tmp_path / "junk.npz").write_bytes(b"not a zip")
        with pytest.raises(nd.errors.DataLossError):
            saver.restore(s, str(tmp_path / "junk"))
        s.run(v.initializer)


def test_var_list_dict_names_and_subsets(tmp_path):
    a = nd.Variable(np.float32(1), name="a")
    b = nd.Variable(np.float32(2), name="b")
    saver = nd.train.Saver({"renamed/a": a})
    with nd.Session() as s:
        s.run([a.initializer, b.initializer])
        p = saver.save(s, str(tmp_path / "m"), write_meta_graph=False)
        assert p == str(tmp_path / "m")
        assert not os.path.exists(p + ".meta")
        with np.load(p + ".npz") as f:
            assert f.files == ["renamed/a"]
        s.run(a.assign(5.0))
        saver.restore(s, p)
        assert s.run(a) == 1.0


def test_constructor_errors():
    with pytest.raises(ValueError, match="No variables to save"):
        nd.train.Saver()
    a = nd.Variable(1.0, name="a")
    with pytest.raises(ValueError, match="same name"):
        nd.train.Saver([a, a])
    with pytest.raises(TypeError):
        nd.train.Saver([nd.constant(1.0)])


def test_allow_empty_saver_saves_nothing(tmp_path):
    saver = nd.train.Saver(allow_empty=True)
    with nd.Session() as s:
        assert saver.save(s, str(tmp_path / "m"), write_meta_graph=False) is None
        saver.restore(s, str(tmp_path / "m"))  # nothing to do
    assert os.listdir(tmp_path) == []


def test_save_errors(tmp_path):
    v = nd.Variable(1.0, name="v")
    saver = nd.train.Saver()
    with nd.Session() as s:
        s.run(v.initializer)
        with pytest.raises(ValueError, match="Parent directory"):
            saver.save(s, str(tmp_path / "missing" / "model"))
        with pytest.raises(ValueError, match="collides"):
            saver.save(s, str(tmp_path / "checkpoint"))
        with pytest.raises(ValueError, match="path components"):
            saver.save(s, str(tmp_path / "m"), latest_filename="a/b")


def test_save_with_global_step_tensor_and_padding(tmp_path):
    gs = nd.train.get_or_create_global_step()
    saver = nd.train.Saver(pad_step_number=True)
    with nd.Session() as s:
        s.run(gs.initializer)
        s.run(gs.assign(42))
        p = saver.save(s, str(tmp_path / "m"), global_step=gs)
    assert p == str(tmp_path / "m-00000042")


def test_uninitialised_variable_fails_save_cleanly(tmp_path):
    nd.Variable(1.0, name="never_initialised")
    saver = nd.train.Saver()
    with nd.Session() as s, pytest.raises(nd.errors.FailedPreconditionError,
                                          match="never_initialised"):
        saver.save(s, str(tmp_path / "m"))
    assert os.listdir(tmp_path) == []


def test_restore_ops_are_colocated_with_variables():
    with nd.device("/job:ps/task:0"):
        v = nd.Variable([1.0, 2.0], name="v")
    with nd.device("/job:worker/task:0"):
        saver = nd.train.Saver()
    restore = nd.get_default_graph().get_operation_by_name(
        saver.saver_def.restore_op_name)
    (assign,) = restore.control_inputs
    ph = assign.inputs[1].op
    for op in (assign, ph):
        assert op.colocation_groups() == [b"loc:@v"]
        assert op.device == v.device


def test_meta_graph_round_trip(tmp_path):
    _g, _vs, _saver, sess, paths = _saved_state(tmp_path)
    sess.close()
    g2 = nd.Graph()
    with g2.as_default():
        saver2 = nd.train.import_meta_graph(paths[0] + ".meta")
        assert saver2 is not None
        names = sorted(v.op.name for v in nd.global_variables())
        assert names == ["flags", "global_step", "h", "layer/b", "layer/w", "words"]
        assert nd.train.get_global_step().op.name == "global_step"
        w = g2.get_tensor_by_name("layer/w:0")
    with nd.Session(graph=g2) as s:
        saver2.restore(s, paths[0])
        np.testing.assert_array_equal(s.run(w), W0)
        # the imported saver saves again
        p = saver2.save(s, str(tmp_path / "again"))
    with np.load(p + ".npz") as f:
        np.testing.assert_array_equal(f["layer/w"], W0)


def test_checkpoint_state_text_format_escapes(tmp_path):
    ckpt = saver_mod.CheckpointState('we"ird\\path\n', ['a', 'we"ird\\path\n'])
    assert saver_mod.CheckpointState.from_text(ckpt.to_text()) == ckpt
    (tmp_path / "checkpoint").write_text("garbage without colon\n")
    assert nd.train.get_checkpoint_state(str(tmp_path)) is None
    assert nd.train.latest_checkpoint(str(tmp_path)) is None
    assert nd.train.latest_checkpoint(str(tmp_path / "none")) is None


def test_save_and_restore_through_a_cluster(servers, tmp_path):
    """The client writes the file; the restore assigns run on the ps task."""
    from helpers import local_cluster

    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        w = nd.Variable(W0, name="w")
        words = nd.Variable(STRINGS, name="words")
    with nd.device("/job:worker/task:0"):
        saver = nd.train.Saver()
    md = nd.RunMetadata()
    with nd.Session(worker.target) as s:
        s.run(nd.global_variables_initializer())
        path = saver.save(s, str(tmp_path / "model"), global_step=1)
        s.run(w.assign(np.zeros((2, 3), np.float32)))
        real_run = s.run

        def traced_run(fetches, feed_dict=None, options=None, run_metadata=None):
            return real_run(fetches, feed_dict, nd.RunOptions(trace_level=3), md)

        s.run = traced_run
        saver.restore(s, path)
        s.run = real_run
        np.testing.assert_array_equal(s.run(w), W0)
        assert s.run(words).tolist() == STRINGS.tolist()
    assigns = [n.node_name for d in md.step_stats.dev_stats if "/job:ps/" in d.device
               for n in d.node_stats if n.node_name.startswith("save/Assign")]
    assert len(assigns) == 2


# -- a directory shared across processes: max_to_keep, leftovers ---------------------
def _checkpoints(directory, base="model"):
    """Step numbers of ``base`` checkpoints in ``directory`` (data files)."""
    return sorted(int(n[len(base) + 1:-len(".npz")]) for n in os.listdir(directory)
                  if n.startswith(base + "-") and n.endswith(".npz"))


def _save_steps(directory, steps, max_to_keep=3):
    """A fresh graph and Saver (as a new process has) saving ``steps``."""
    with nd.Graph().as_default():
        v = nd.Variable(0, name="v")
        saver = nd.train.Saver(max_to_keep=max_to_keep)
        with nd.Session() as sess:
            sess.run(v.initializer)
            for s in steps:
                sess.run(v.assign(s))
                saver.save(sess, os.path.join(directory, "model"), global_step=s)
    return saver


def test_new_saver_recovers_the_directory_and_keeps_max_to_keep(tmp_path):
    d = str(tmp_path)
    _save_steps(d, [1, 2, 3, 4])
    assert _checkpoints(d) == [2, 3, 4]
    saver = _save_steps(d, [10])  # another "process": the listed ones count
    assert _checkpoints(d) == [3, 4, 10]
    assert [os.path.basename(p) for p in saver.last_checkpoints] == [
        "model-3", "model-4", "model-10"]
    ckpt = nd.train.get_checkpoint_state(d)
    assert [os.path.basename(p) for p in ckpt.all_model_checkpoint_paths] == [
        "model-3", "model-4", "model-10"]
    _save_steps(d, [20, 21])
    assert _checkpoints(d) == [10, 20, 21]
    assert not [n for n in os.listdir(d) if n.endswith(".meta") and
                int(n[6:-5]) not in (10, 20, 21)]
    # A checkpoint the state never listed (killed before the state was written)
    # is this saver's own: it counts, oldest first.
    (tmp_path / "model-99.npz").write_bytes((tmp_path / "model-21.npz").read_bytes())
    _save_steps(d, [30])
    assert _checkpoints(d) == [20, 21, 30]


def test_saver_removes_its_leftover_temp_files_only(tmp_path):
    d = str(tmp_path)
    _save_steps(d, [1])
    mine = ["model-2.npz.k2j3h4g5.tmp", "model-2.meta.abcd1234.tmp",
            "checkpoint.zz9_yy8x.tmp"]
    foreign = ["notes.txt.abcdefgh.tmp", "othermodel-2.npz.abcdefgh.tmp",
               "model-2.txt"]
    for n in mine + foreign:
        (tmp_path / n).write_bytes(b"partial")
        os.utime(tmp_path / n, (1_000_000, 1_000_000))  # long before this save
    _save_steps(d, [3])
    left = set(os.listdir(d))
    assert not left & set(mine)
    assert set(foreign) <= left
    assert _checkpoints(d) == [1, 3]


_SAVE_LOOP = """
import os, sys
import nbdist as nd
directory, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
v = nd.Variable([0.0] * 100000, name="v")
saver = nd.train.Saver(max_to_keep=3)
with nd.Session() as sess:
    sess.run(v.initializer)
    for i in range(start, start + count):
        sess.run(v.assign([float(i)] * 100000))
        saver.save(sess, os.path.join(directory, "model"), global_step=i)
        print("SAVED", i, flush=True)
"""


@pytest.mark.slow
def test_max_to_keep_holds_across_three_killed_processes(tmp_path):
    import signal
    import subprocess
    import sys

    d = str(tmp_path)
    for round_, count in enumerate([1000, 1000, 6]):
        start = 100 * round_
        p = subprocess.Popen([sys.executable, "-c", _SAVE_LOOP, d, str(start),
                              str(count)], stdout=subprocess.PIPE, text=True)
        try:
            saved = []
            for line in p.stdout:  # bounded: the loop saves ``count`` times
                saved.append(int(line.split()[1]))
                if count > 100 and len(saved) >= 8:
                    os.kill(p.pid, signal.SIGKILL)  # mid-loop, maybe mid-write
                    break
            assert p.wait(60) is not None
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            p.stdout.close()
        # At most one checkpoint over while a save was cut off.
        assert len(_checkpoints(d)) <= 3 + 1, os.listdir(d)
        assert saved
    assert _checkpoints(d) == [203, 204, 205]
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]
    assert nd.train.latest_checkpoint(d) == os.path.join(d, "model-205")
