"""``Saver`` ``max_to_keep`` bookkeeping of a non-sharded saver, as TF's
saver_test walks it: the oldest checkpoint is deleted, re-saving a kept path
moves it to the end, a saver given ``set_last_checkpoints`` continues another's
list, and a fresh saver of another series neither adopts nor deletes the
checkpoints of other prefixes. Oracle: TF 2.21 on the same steps (the lists
and ``checkpoint_exists`` results below are TF's)."""

from __future__ import annotations

import os

import nbdist as nd

tf = nd.compat.v1


def test_non_sharded_max_to_keep_bookkeeping(tmp_path):
    def path(n):
        return str(tmp_path / n)

    def names(saver):
        return [os.path.basename(p) for p in saver.last_checkpoints]

    def exist():
        return [tf.train.checkpoint_exists(path(n)) for n in ("s1", "s2", "s3")]

    with nd.Graph().as_default():
        v = tf.Variable(1.0, name="v")
        save = tf.train.Saver({"v": v}, max_to_keep=2, sharded=False)
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert save.last_checkpoints == []
            for n in ("s1", "s2", "s3"):
                save.save(sess, path(n))
            assert (names(save), exist()) == (["s2", "s3"], [False, True, True])
            save2 = tf.train.Saver(saver_def=save.as_saver_def())
            save2.set_last_checkpoints(save.last_checkpoints)
            save3 = tf.train.Saver(saver_def=save.as_saver_def())
            save.save(sess, path("s2"))
            assert (names(save), exist()) == (["s3", "s2"], [False, True, True])
            save2.save(sess, path("s1"))
            assert (names(save2), exist()) == (["s3", "s1"], [True, True, True])
            save3.save(sess, path("s2"))
            assert (names(save3), exist()) == (["s2"], [True, True, True])
            state = tf.train.get_checkpoint_state(str(tmp_path))
            assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
                "s2"]
