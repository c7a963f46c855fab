"""``tf.train.Checkpoint``, ``CheckpointManager`` and ``CheckpointOptions`` as
TF1 graph mode uses them (issue 34): keys as TF 2.21 writes them for the same
model (checked with tf.compat.v1), TF V2 bundles, restore status checks, and
the manager's ``max_to_keep`` with its ``checkpoint`` state file."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1

# TF 2.21's keys for the program in `_model_and_train` (tf.train.list_variables).
TF_KEYS = [
    "model/layers/0/.ATTRIBUTES/VARIABLE_VALUE",
    "model/layers/0/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
    "model/layers/0/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
    "model/w/.ATTRIBUTES/VARIABLE_VALUE",
    "model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
    "model/w/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
    "optimizer/beta1_power/.ATTRIBUTES/VARIABLE_VALUE",
    "optimizer/beta2_power/.ATTRIBUTES/VARIABLE_VALUE",
    "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
]


class Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([1.0, 2.0], name="w")
        self.layers = [tf.Variable(3.0, name="b")]


def _model_and_train():
    m = Model()
    opt = tf.train.AdamOptimizer(0.1)
    train = opt.minimize(nd.reduce_sum(m.w * m.w) + m.layers[0])
    return m, opt, train


def test_save_writes_tfs_keys_and_restore_round_trips(tmp_path):
    with nd.Graph().as_default():
        m, opt, train = _model_and_train()
        ckpt = tf.train.Checkpoint(model=m, optimizer=opt)
        with nd.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(train)
            trained = s.run(m.w)
            path = ckpt.save(str(tmp_path / "pre"), session=s)
            assert os.path.basename(path) == "pre-1"
            assert sorted(k for k, _ in tf.train.list_variables(path)) == TF_KEYS
            assert os.path.exists(path + ".index")  # a TF V2 bundle
            assert tf.train.latest_checkpoint(str(tmp_path)) == path
            s.run(m.w.assign([9.0, 9.0]))
            status = ckpt.restore(path)
            status.run_restore_ops(s)
            status.assert_consumed()
            np.testing.assert_allclose(s.run(m.w), trained)
            slot = opt.get_slot(m.w, "m")
            saved_slot = tf.train.load_variable(
                path, "model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE")
            np.testing.assert_allclose(s.run(slot), saved_slot)
            assert s.run(ckpt.save_counter) == 1
            assert os.path.basename(ckpt.save(str(tmp_path / "pre"), s)) == "pre-2"
    # A checkpoint of only the model: the optimizer's values stay unused.
    with nd.Graph().as_default():
        m = Model()
        partial = tf.train.Checkpoint(model=m)
        with nd.Session() as s:
            status = partial.restore(path)
            status.initialize_or_restore(s)
            np.testing.assert_allclose(s.run(m.w), trained)
            with pytest.raises(AssertionError, match="beta1_power"):
                status.assert_consumed()
            status.assert_existing_objects_matched()
            status.assert_nontrivial_match()


def test_restore_none_and_missing_objects(tmp_path):
    with nd.Graph().as_default():
        w = tf.Variable(5.0)
        ckpt = tf.train.Checkpoint(w=w)
        with nd.Session() as s:
            s.run(w.initializer)
            path = ckpt.write(str(tmp_path / "exact"), session=s)
        assert os.path.basename(path) == "exact"  # write: no counter, no state
        assert not os.path.exists(tmp_path / "checkpoint")
    with nd.Graph().as_default():
        w, extra = tf.Variable(0.0), tf.Variable(7.0)
        ckpt = tf.train.Checkpoint(w=w, extra=extra)
        with nd.Session() as s:
            status = ckpt.restore(path)
            status.initialize_or_restore(s)
            assert s.run([w, extra]) == [5.0, 7.0]
            with pytest.raises(AssertionError, match="extra"):
                status.assert_existing_objects_matched()
            fresh = ckpt.restore(None)
            with pytest.raises(AssertionError, match="save_path=None"):
                fresh.assert_consumed()
        with pytest.raises(ValueError, match="session"):  # no default session
            ckpt.save(str(tmp_path / "x"))


def test_manager_keeps_max_to_keep_and_writes_the_state_file(tmp_path):
    with nd.Graph().as_default():
        m, opt, train = _model_and_train()
        ckpt = tf.train.Checkpoint(model=m, optimizer=opt)
        manager = tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2)
        assert manager.latest_checkpoint is None
        with nd.Session() as s, s.as_default():
            s.run(tf.global_variables_initializer())
            for _ in range(3):
                s.run(train)
                manager.save()
            last = s.run(m.w)
    names = [os.path.basename(p) for p in manager.checkpoints]
    # As TF: numbered by the save counter, the oldest deleted.
    assert names == ["ckpt-2", "ckpt-3"]
    assert not os.path.exists(tmp_path / "ckpt-1.index")
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == names
    assert len(state.all_model_checkpoint_timestamps) == 2
    assert tf.train.latest_checkpoint(str(tmp_path)) == manager.latest_checkpoint
    # A new program's manager finds them, and restores the newest.
    with nd.Graph().as_default():
        m = Model()
        ckpt = tf.train.Checkpoint(model=m)
        manager = tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2)
        assert [os.path.basename(p) for p in manager.checkpoints] == names
        with nd.Session() as s, s.as_default():
            s.run(tf.global_variables_initializer())
            assert manager.restore_or_initialize().endswith("ckpt-3")
            np.testing.assert_allclose(s.run(m.w), last)
            assert os.path.basename(manager.save(checkpoint_number=10)) == "ckpt-10"
    assert not os.path.exists(tmp_path / "ckpt-2.index")
    options = tf.train.CheckpointOptions(experimental_io_device="/job:localhost")
    assert options.experimental_io_device == "/job:localhost"
    with pytest.raises(ValueError, match="max_to_keep"):
        tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=0)
