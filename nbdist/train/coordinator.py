"""``Coordinator``: lets a set of threads stop together, as ``tf.train.Coordinator``.

>>> import threading
>>> coord = Coordinator()
>>> def work():
...     with coord.stop_on_exception():
...         while not coord.should_stop():
...             coord.request_stop()
>>> t = threading.Thread(target=work)
>>> coord.register_thread(t); t.start()
>>> coord.join()
>>> coord.should_stop()
True
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from nbdist import errors

_log = logging.getLogger("nbdist")


class Coordinator:
    """Stops threads together and reports the first exception to ``join``.

    Exceptions of ``clean_stop_exception_types`` (``OutOfRangeError`` by
    default) stop the threads without being reported.
    """

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exception: BaseException | None = None
        self._joined = False
        self._registered_threads: set = set()

    def _filter_exception(self, ex):
        if isinstance(ex, tuple):
            ex = ex[1]
        if ex is not None and isinstance(ex, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex=None):
        """Asks every thread to stop; ``ex`` (an exception, or an ``exc_info``
        tuple) is re-raised by ``join`` unless it is a clean-stop type. Only
        the first exception is kept."""
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined and ex is not None:
                # Nobody would see it after join: raise it here.
                raise ex
            if not self._stop_event.is_set():
                if ex is not None and self._exception is None:
                    if not isinstance(ex, BaseException):
                        ex = ValueError(f"ex must be an exception or an exc_info "
                                        f"tuple, got {ex!r}")
                    _log.info("Error reported to Coordinator: %s, %s",
                              type(ex).__name__, ex)
                    self._exception = ex
                self._stop_event.set()

    def clear_stop(self):
        """Clears the stop flag (and the recorded exception) for a restart."""
        with self._lock:
            self._joined = False
            self._exception = None
            if self._stop_event.is_set():
                self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """Inside, any exception requests a stop (and is recorded, not raised)."""
        try:
            yield
        except BaseException as e:  # noqa: BLE001 - as TF: every exception
            self.request_stop(e)

    def wait_for_stop(self, timeout=None) -> bool:
        """Waits until a stop is requested; True if it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread):
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """Waits for the threads (registered ones plus ``threads``) to stop.

        After a stop is requested, threads get ``stop_grace_period_secs`` to
        finish. Re-raises the exception passed to ``request_stop``, if any;
        otherwise threads still alive are a RuntimeError (or only logged with
        ``ignore_live_threads``).
        """
        with self._lock:
            if threads is None:
                threads = set(self._registered_threads)
            else:
                threads = self._registered_threads.union(set(threads))
            threads = list(threads)
        # A thread's end has no event to wait on together with the stop event:
        # check both every second (as TF does).
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        stop_wait_secs = 0.001
        while any(t.is_alive() for t in threads) and stop_grace_period_secs >= 0.0:
            # The grace period, in doubling steps (as TF).
            time.sleep(stop_wait_secs)
            stop_grace_period_secs -= stop_wait_secs
            stop_wait_secs = 2 * stop_wait_secs
            stop_wait_secs = max(min(stop_wait_secs, stop_grace_period_secs), 0.001)
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exception is not None:
                raise self._exception
            if stragglers:
                if ignore_live_threads:
                    _log.info("Coordinator stopped with threads still running: %s",
                              " ".join(stragglers))
                else:
                    raise RuntimeError("Coordinator stopped with threads still "
                                       "running: " + " ".join(stragglers))

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self):
        """Raises the exception passed to ``request_stop``, if any."""
        with self._lock:
            if self._exception is not None:
                raise self._exception


class LooperThread(threading.Thread):
    """A thread that runs ``target(*args)`` every ``timer_interval_secs`` until
    the coordinator stops (as ``tf.train.LooperThread``)."""

    def __init__(self, coord, timer_interval_secs, target=None, args=None,
                 kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord}")
        super().__init__()
        self.daemon = True
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        self._args = args or ()
        self._kwargs = kwargs or {}
        self._coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args,
                              kwargs=kwargs)
        looper.start()
        return looper

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_timer_time = time.time()
                while not self._coord.wait_for_stop(
                        max(0.0, next_timer_time - time.time())):
                    next_timer_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self):
        pass

    def stop_loop(self):
        pass

    def run_loop(self):
        if self._target:
            self._target(*self._args, **self._kwargs)


__all__ = ["Coordinator", "LooperThread"]
