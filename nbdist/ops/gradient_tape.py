"""``GradientTape`` as TF1 graph mode has it: a context that records the ops
built inside it, and ``gradient`` builds symbolic gradients (``nd.gradients``)
through the recorded ops only.

A tensor is differentiable on the tape when it was ``watch``-ed or produced by
a recorded op; a trainable variable also when ``watch_accessed_variables`` is
on. Gradients do not flow through ops built outside the tape or under
``stop_recording``; a source the tape cannot reach gets None. A tape that is
not ``persistent`` computes one set of gradients.

>>> import nbdist as nd
>>> x = nd.constant(3.0)
>>> with nd.GradientTape() as tape:
...     tape.watch(x)
...     y = x * x
>>> with nd.Session() as s:
...     float(s.run(tape.gradient(y, x)))
6.0
"""

from __future__ import annotations

import contextlib

import numpy as np

from nbdist.framework import nest
from nbdist.framework.ops import Tensor, convert_to_tensor, get_default_graph
from nbdist.ops import array_ops as A
from nbdist.ops.gradients import gradients
from nbdist.ops.variables import Variable


class GradientTape:
    """Records ops built inside ``with`` for differentiation (TF's class)."""

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = persistent
        self._watch_accessed_variables = watch_accessed_variables
        self._graph = None
        self._recording = False
        self._start = 0
        self._recorded: set = set()  # ids of recorded ops
        self._watched: list = []
        self._used = False

    def __enter__(self):
        self._graph = get_default_graph()
        self._resume()
        return self

    def __exit__(self, *exc):
        self._pause()

    def _resume(self):
        self._recording = True
        self._start = len(self._graph.get_operations())

    def _pause(self):
        if self._recording:
            ops = self._graph.get_operations()[self._start:]
            self._recorded.update(id(op) for op in ops)
        self._recording = False

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops built inside this block are not recorded."""
        if not self._recording:
            raise ValueError("Tape currently not recording.")
        self._pause()
        try:
            yield
        finally:
            self._resume()

    def reset(self):
        """Forgets everything recorded so far (the tape keeps recording)."""
        recording = self._recording
        self._recorded, self._watched = set(), []
        if recording:
            self._resume()

    def watch(self, tensor):
        """Makes ``tensor`` (a nest of tensors or variables) differentiable."""
        for t in nest.flatten(tensor):
            if not isinstance(t, (Tensor, Variable)):
                raise ValueError(  # noqa: TRY004 - TF raises ValueError here
                    f"Passed in object of type {type(t)}, not tf.Tensor or "
                    "tf.Variable")
            self._watched.append(t)

    def watched_variables(self):
        """The variables watched explicitly, in the order they were watched."""
        return tuple(v for v in self._watched if isinstance(v, Variable))

    def _ops(self):
        ops = set(self._recorded)
        if self._recording:
            ops.update(id(op) for op in self._graph.get_operations()[self._start:])
        return ops

    def _reachable(self, source, recorded) -> bool:
        if any(source is w for w in self._watched):
            return True
        if isinstance(source, Variable):
            return self._watch_accessed_variables and source.trainable
        return id(source.op) in recorded

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients="none"):
        """d(sum of ``target``)/d(each of ``sources``), a structure like
        ``sources``; None where a source is not reachable on the tape."""
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to "
                               "compute one set of gradients (or jacobians)")
        self._used = True
        recorded = self._ops()
        flat = nest.flatten(sources)
        # A target built off the tape does not depend on anything recorded.
        all_targets = [convert_to_tensor(t) for t in nest.flatten(target)]
        weights = (nest.flatten(output_gradients) if output_gradients is not None
                   else [None] * len(all_targets))
        kept = [(t, w) for t, w in zip(all_targets, weights)
                if id(t.op) in recorded or any(t is x for x in self._watched)]
        targets = [t for t, _ in kept]
        output_gradients = (None if output_gradients is None
                            else [w for _, w in kept])
        live = ([s for s in flat if self._reachable(s, recorded)] if targets
                else [])
        source_ops = {id(s.op) for s in live}

        def off_tape(t):
            # A source, or a variable source's read, is where gradients end.
            if id(t.op) in recorded or id(t.op) in source_ops:
                return False
            return not (t.op.type in ("Identity", "ReadVariableOp") and t.op.inputs
                        and id(t.op.inputs[0].op) in source_ops)

        # The boundary: inputs of recorded ops that were built off the tape.
        stops = [t for op in self._graph.get_operations() if id(op) in recorded
                 for t in op.inputs if off_tape(t)]
        grads = iter(gradients(targets, live, grad_ys=output_gradients,
                               stop_gradients=stops,
                               unconnected_gradients=unconnected_gradients)
                     if live else [])
        out = [next(grads) if any(s is x for x in live) else
               (A.zeros_like(s) if unconnected_gradients == "zero" else None)
               for s in flat]
        return nest.pack_sequence_as(sources, out)

    def jacobian(self, target, sources, unconnected_gradients="none",
                 parallel_iterations=None, experimental_use_pfor=True):
        """d(each element of ``target``)/d(``sources``): for a source of shape
        S, a tensor of shape ``target.shape + S`` (static target shape)."""
        del parallel_iterations, experimental_use_pfor
        target = convert_to_tensor(target)
        size = target.shape.num_elements()
        if size is None:
            raise ValueError("jacobian: nbdist needs a target of static shape")
        persistent, self._persistent = self._persistent, True
        try:
            # Row i: the gradient of the target weighted by the i-th one-hot.
            eye = np.eye(size, dtype=target.dtype.base_dtype.as_numpy_dtype)
            shape = target.shape.as_list()
            rows = [self.gradient(target, sources,
                                  output_gradients=eye[i].reshape(shape),
                                  unconnected_gradients=unconnected_gradients)
                    for i in range(size)]
        finally:
            self._persistent = persistent
        flat_rows = [nest.flatten(r) for r in rows]
        out = []
        for j, s in enumerate(nest.flatten(sources)):
            col = [r[j] for r in flat_rows]
            if any(c is None for c in col):
                out.append(None)
                continue
            shape = target.shape.as_list() + convert_to_tensor(s).shape.as_list()
            out.append(A.reshape(A.stack(col), shape))
        return nest.pack_sequence_as(sources, out)

    def batch_jacobian(self, target, source, unconnected_gradients="none",
                       parallel_iterations=None, experimental_use_pfor=True):
        """Per example ``i`` of the batch (axis 0): d ``target[i]`` /
        d ``source[i]``, of shape ``[batch] + target.shape[1:] +
        source.shape[1:]``."""
        del parallel_iterations, experimental_use_pfor
        full = self.jacobian(target, source, unconnected_gradients)
        if full is None:
            return None
        t_rank, s_rank = target.shape.rank, source.shape.rank
        batch = target.shape.as_list()[0]
        # The diagonal over the two batch axes of the full jacobian.
        moved = A.transpose(full, [0, t_rank] + [i for i in range(1, t_rank)]
                            + list(range(t_rank + 1, t_rank + s_rank)))
        return A.stack([moved[i, i] for i in range(batch)])


__all__ = ["GradientTape"]
