"""Kernels of ``nbdist.ops.critical_section_ops``: a mutex resource, a lock
object that holds it, released when consumed or when the run drops it (as TF
frees its lock tensor)."""

from __future__ import annotations

import threading

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import unshared_resources


class Mutex:
    """A mutex a step waits for with its cancellation and deadlines."""

    def __init__(self):
        self._cond = threading.Condition()
        self._held = False

    def try_acquire(self) -> bool:
        with self._cond:
            if self._held:
                return False
            self._held = True
            return True

    def wait(self, timeout: float) -> None:
        with self._cond:
            if self._held:
                self._cond.wait(timeout)

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()


class MutexLockHandle:
    """The held mutex; released once, by ``release`` or when collected."""

    def __init__(self, mutex: Mutex):
        self._mutex = mutex

    def release(self) -> None:
        mutex, self._mutex = self._mutex, None
        if mutex is not None:
            mutex.release()

    def __del__(self):
        self.release()


@register_kernel("MutexV2")
def mutex_kernel(node):
    a = node.attrs
    name = a["shared_name"] or node.name
    rm = unshared_resources(node, a["shared_name"])
    return lambda step: rm.lookup_or_create(a["container"], "mutex", name, Mutex)


@register_kernel("MutexLock")
def mutex_lock_kernel(node):
    def compute(step, mutex):
        step.wait(mutex.try_acquire, "the critical section's mutex", mutex.wait)
        return MutexLockHandle(mutex)

    return compute


@register_kernel("ConsumeMutexLock")
def consume_mutex_lock_kernel(node):
    def compute(step, lock):
        lock.release()

    return compute
