"""``SyncReplicasOptimizer``: synchronous replicated training, as TF's.

Built exactly as the original:

* one ``ConditionalAccumulator`` per variable, on the variable's device, with
  ``shared_name=<var.name>/grad_accum`` so that every worker's graph binds to
  the same accumulator; a worker's ``train_op`` pushes its gradients there
  tagged with its ``local_step`` (stale gradients are dropped), then
  dequeues a token from the shared ``sync_token_q`` queue and stores it as
  its new ``local_step``;
* the chief runs ``sync_op`` in a queue-runner thread: it takes the average
  of ``replicas_to_aggregate`` gradients of each variable (the takes of the
  accumulators of one device wait together, as TF's concurrent takes do), applies them with
  the wrapped optimizer (incrementing the global step) and enqueues
  ``max(total_num_replicas, replicas_to_aggregate)`` tokens holding the new
  global step;
* ``local_step`` (``sync_rep_local_step``) is a local variable next to the
  worker, initialised from the global step by ``local_step_init_op``, which
  the hook of ``make_session_run_hook`` runs after each session creation.

Two differences follow from nbdist's runtime: the token value is read from
the global step *after* the update (TF's ref read aliased the variable's
buffer; nbdist reads are snapshots), and the op storing the token is
explicitly colocated with ``local_step`` (TF's placer moved it there).

Gradients are averaged, not summed: scale the learning rate accordingly.

As in TF, tokens are not tied to workers: a fast worker may take a slow
one's token and contribute twice to an update, and with the default
``replicas_to_aggregate`` initial tokens every worker's second step pushes a
stale gradient (dropped) while the first update is applied. For updates that
each average exactly one gradient per worker, seed no tokens
(``make_session_run_hook(is_chief, num_tokens=0)``) and keep the workers in
lockstep.
"""

from __future__ import annotations

import logging

from nbdist.framework import ops
from nbdist.ops.accumulator_ops import (
    ConditionalAccumulator,
    SparseConditionalAccumulator,
    take_grads,
)
from nbdist.ops.control_flow_ops import no_op
from nbdist.ops.data_flow_ops import FIFOQueue
from nbdist.framework.dtypes import int32
from nbdist.ops.indexed_slices import IndexedSlices
from nbdist.framework.ops import GraphKeys, Tensor
from nbdist.ops.variables import (
    Variable,
    global_variables,
    report_uninitialized_variables,
)
from nbdist.train.hooks import SessionRunHook
from nbdist.train.optimizer import Optimizer
from nbdist.train.queue_runner import QueueRunner

_log = logging.getLogger("nbdist")


def _fill(n, value):
    from nbdist.ops.array_ops import fill

    return fill([n], value)


def _fresh_read(global_step):
    """A read of the global step made where it is called (so that control
    dependencies in scope order it after an update)."""
    from nbdist.framework.constant_op import identity

    if isinstance(global_step, Variable):
        return global_step.read_value()
    return identity(global_step)


class SyncReplicasOptimizer(Optimizer):
    """Aggregates the gradients of ``replicas_to_aggregate`` replicas and
    applies their average with ``opt``, once per global step.

    Usage (each worker builds the same graph)::

        opt = nd.train.SyncReplicasOptimizer(
            nd.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
            total_num_replicas=2)
        train_op = opt.minimize(loss, global_step=global_step)
        hook = opt.make_session_run_hook(is_chief)
        with nd.train.MonitoredTrainingSession(master, is_chief,
                                               hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    """

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None,
                 variable_averages=None, variables_to_average=None, use_locking=False,
                 name="sync_replicas"):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        _log.info("SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
                  replicas_to_aggregate, total_num_replicas)
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._gradients_applied = False
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._global_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        # (accumulator, device) pairs, to set their global step at chief init.
        self._accumulator_list = []

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's ``compute_gradients``."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Builds the synchronisation; returns the replicas' ``train_op``.

        Raises:
          ValueError: if ``grads_and_vars`` is empty or ``global_step`` is None
            (the staleness of gradients cannot be checked without it).
        """
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        g = ops.get_default_graph()
        train_ops = []
        aggregated_grad = []
        var_list = []

        # The local anchor is placed on this worker (by the device scope):
        # colocating local_step with it keeps that variable off the ps.
        local_anchor = no_op()
        with g.colocate_with(local_anchor):
            self._local_step = Variable(
                initial_value=0, trainable=False,
                collections=[GraphKeys.LOCAL_VARIABLES],
                dtype=global_step.dtype.base_dtype, name="sync_rep_local_step")
        self.local_step_init_op = self._local_step.assign(global_step).op
        chief_init_ops = [self.local_step_init_op]
        self.ready_for_local_init_op = report_uninitialized_variables(
            global_variables())

        with ops.name_scope(None, self._name):
            for grad, var in grads_and_vars:
                var_list.append(var)
                with g.device(var.device):
                    if grad is None:
                        aggregated_grad.append(None)  # pass-through
                        continue
                    if isinstance(grad, IndexedSlices):
                        # As TF: the rows are aggregated sparsely, and applied
                        # as an IndexedSlices.
                        grad_accum = SparseConditionalAccumulator(
                            grad.dtype.base_dtype, shape=var.get_shape(),
                            shared_name=var.name + "/grad_accum")
                        train_ops.append(grad_accum.apply_indexed_slices_grad(
                            grad, local_step=self._local_step))
                        aggregated_grad.append(grad_accum)
                        self._accumulator_list.append((grad_accum, var.device))
                        continue
                    if not isinstance(grad, Tensor):
                        if hasattr(grad, "values") and hasattr(grad, "indices"):
                            from nbdist.train.optimizer import _densify

                            grad = _densify(grad)
                        else:
                            raise ValueError("Unknown grad type!")
                    grad_accum = ConditionalAccumulator(
                        grad.dtype.base_dtype, shape=var.get_shape(),
                        shared_name=var.name + "/grad_accum")
                    train_ops.append(grad_accum.apply_grad(
                        grad, local_step=self._local_step))
                    aggregated_grad.append(grad_accum)  # taken below
                    self._accumulator_list.append((grad_accum, var.device))

            # The takes of the accumulators of one device wait together (TF's
            # executor runs them concurrently; nbdist's runs a step's nodes in
            # turn), so a stale push cannot reach an accumulator whose take
            # has not started yet.
            by_device: dict = {}
            for accum, dev in self._accumulator_list:
                by_device.setdefault(dev, []).append(accum)
            taken = {}
            for dev, accums in by_device.items():
                with g.device(dev):
                    for accum, avg in zip(accums, take_grads(
                            accums, self._replicas_to_aggregate)):
                        taken[id(accum)] = avg
            aggregated_grad = [None if a is None else taken[id(a)]
                               for a in aggregated_grad]
            aggregated_grads_and_vars = list(zip(aggregated_grad, var_list))

            # sync_op is placed with the global step.
            with g.device(global_step.device), g.name_scope(""):
                update_op = self._opt.apply_gradients(aggregated_grads_and_vars,
                                                      global_step)

            with g.device(global_step.device), g.name_scope(""):
                sync_token_queue = FIFOQueue(
                    -1, global_step.dtype.base_dtype, shapes=[[]],
                    name="sync_token_q", shared_name="sync_token_q")
                self._sync_token_queue = sync_token_queue
                # The queue runner gets a dummy queue: closing the real one on
                # the ps would not reopen it.
                dummy_queue = FIFOQueue(1, int32, shapes=[[]], name="dummy_queue",
                                        shared_name="dummy_queue")

            with g.device(global_step.device), g.name_scope(""):
                # Replicas wait until they get a token from the token queue.
                with g.control_dependencies(train_ops):
                    token = sync_token_queue.dequeue()
                with g.colocate_with(self._local_step.op):
                    train_op = self._local_step.assign(token)

                with g.control_dependencies([update_op]):
                    # The tokens carry the global step after the update.
                    tokens = _fill(self._tokens_per_step, _fresh_read(global_step))
                    sync_op = sync_token_queue.enqueue_many((tokens,))

                if self._variable_averages is not None:
                    with g.control_dependencies([sync_op]), g.name_scope(""):
                        sync_op = self._variable_averages.apply(
                            self._variables_to_average)

                self._chief_queue_runner = QueueRunner(dummy_queue, [sync_op])
            for accum, dev in self._accumulator_list:
                with g.device(dev):
                    chief_init_ops.append(accum.set_global_step(global_step,
                                                                name="SetGlobalStep"))
            with g.control_dependencies(chief_init_ops):
                self.chief_init_op = no_op(name="group_deps")
            self._gradients_applied = True
            return train_op

    def get_chief_queue_runner(self):
        """The ``QueueRunner`` the chief runs (aggregate, apply, push tokens).

        Raises:
          ValueError: if called before ``apply_gradients``.
        """
        if self._gradients_applied is False:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def variables(self):
        """The wrapped optimizer's variables (not ``local_step``)."""
        return self._opt.variables()

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens=-1):
        """An op that puts ``num_tokens`` tokens (``replicas_to_aggregate`` by
        default) in the token queue, for the first step.

        Raises:
          ValueError: if called before ``apply_gradients``, or with fewer than
            ``replicas_to_aggregate - total_num_replicas`` tokens.
        """
        if self._gradients_applied is False:
            raise ValueError("get_init_tokens_op() should be called after "
                             "apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} "
                             f"(given) vs {tokens_needed} (needed)")
        g = ops.get_default_graph()
        if num_tokens > 0:
            with g.device(self._global_step.device), g.name_scope(""):
                tokens = _fill(num_tokens, self._global_step)
                init_tokens = self._sync_token_queue.enqueue_many((tokens,))
        else:
            init_tokens = no_op(name="no_init_tokens")
        return init_tokens

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        """A hook that runs the init ops and (on the chief) seeds the tokens and
        starts the chief queue runner after each session creation."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _SyncReplicasOptimizerHook(SessionRunHook):
    def __init__(self, sync_optimizer, is_chief, num_tokens):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self):
        if self._sync_optimizer._gradients_applied is False:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called "
                             "before using the hook.")
        if self._is_chief:
            self._local_init_op = self._sync_optimizer.chief_init_op
            self._ready_for_local_init_op = self._sync_optimizer.ready_for_local_init_op
            self._q_runner = self._sync_optimizer.get_chief_queue_runner()
            self._init_tokens_op = self._sync_optimizer.get_init_tokens_op(
                self._num_tokens)
        else:
            self._local_init_op = self._sync_optimizer.local_step_init_op
            self._ready_for_local_init_op = self._sync_optimizer.ready_for_local_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session, coord):
        from nbdist.train.session_manager import _ready

        local_init_success, msg = _ready(
            self._ready_for_local_init_op, session,
            "Model is not ready for SyncReplicasOptimizer local init.")
        if not local_init_success:
            raise RuntimeError("Init operations did not make model ready for "
                               "SyncReplicasOptimizer local_init. Init op: "
                               f"{self._local_init_op.name}, error: {msg}")
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True,
                                          start=True)


__all__ = ["SyncReplicasOptimizer"]
