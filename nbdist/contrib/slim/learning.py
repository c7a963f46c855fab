"""``slim.learning``: ``create_train_op`` (the loss, after one optimizer step
that first runs the ``UPDATE_OPS``) and a small ``train`` loop."""

from __future__ import annotations

import nbdist as nd
from nbdist.framework.ops import GraphKeys

_USE_GLOBAL_STEP = 0


def create_train_op(total_loss, optimizer, global_step=_USE_GLOBAL_STEP,
                    update_ops=None, variables_to_train=None,
                    clip_gradient_norm=0, summarize_gradients=False,
                    gate_gradients=1, aggregation_method=None,
                    colocate_gradients_with_ops=False, gradient_multipliers=None,
                    check_numerics=True):
    """A tensor that, when run, applies one ``optimizer`` step to
    ``variables_to_train`` (default: the trainable variables) after the
    ``update_ops`` (default: ``UPDATE_OPS``), and returns ``total_loss``.
    ``global_step`` (default: the graph's) is incremented;
    ``clip_gradient_norm`` > 0 clips by global norm; ``gradient_multipliers``
    ({variable or name: factor}) scales gradients."""
    if global_step is _USE_GLOBAL_STEP:
        global_step = nd.train.get_or_create_global_step()
    if update_ops is None:
        update_ops = nd.get_collection(GraphKeys.UPDATE_OPS)
    update_ops = list(update_ops)
    if variables_to_train is None:
        variables_to_train = nd.trainable_variables()
    with nd.name_scope("train_op"):
        if update_ops:
            with nd.control_dependencies(update_ops):
                total_loss = nd.identity(total_loss, name="update_barrier")
        grads = optimizer.compute_gradients(total_loss, variables_to_train)
        if gradient_multipliers:
            by_name = {(k if isinstance(k, str) else k.op.name): v
                       for k, v in gradient_multipliers.items()}
            grads = [(g * by_name[v.op.name] if g is not None and
                      v.op.name in by_name else g, v) for g, v in grads]
        if clip_gradient_norm > 0:
            gs = [g for g, _ in grads]
            clipped, _ = nd.clip_by_global_norm(
                [g for g in gs if g is not None], clip_gradient_norm)
            it = iter(clipped)
            grads = [(next(it) if g is not None else None, v) for g, v in grads]
        if summarize_gradients:
            for g, v in grads:
                if g is not None:
                    nd.summary.histogram(v.op.name + "/gradient", g)
        grad_updates = optimizer.apply_gradients(grads, global_step=global_step)
        with nd.control_dependencies([grad_updates]):
            train_op = nd.identity(total_loss, name="train_op")
    nd.add_to_collection(GraphKeys.TRAIN_OP, train_op)
    return train_op


def train(train_op, logdir, number_of_steps=None, log_every_n_steps=1,
          master="", is_chief=True, global_step=None, init_fn=None,
          save_summaries_secs=600, save_interval_secs=600, session_config=None,
          hooks=None, **unused):
    """Runs ``train_op`` until the global step reaches ``number_of_steps``, in a
    ``MonitoredTrainingSession`` on ``master`` (checkpoints in ``logdir``, a
    last one when training ends); returns the last loss."""
    hooks = list(hooks or [])
    if number_of_steps is not None:
        hooks.append(nd.train.StopAtStepHook(last_step=number_of_steps))
    loss = None
    with nd.train.MonitoredTrainingSession(
            master=master, is_chief=is_chief, checkpoint_dir=logdir,
            hooks=hooks, config=session_config,
            # As slim: a final checkpoint in logdir even without periodic ones.
            save_checkpoint_secs=(save_interval_secs if save_interval_secs
                                  else 10 ** 9) if logdir else None,
            save_summaries_secs=save_summaries_secs) as sess:
        if init_fn is not None:
            init_fn(sess)
        while not sess.should_stop():
            loss = sess.run(train_op)
    return loss
