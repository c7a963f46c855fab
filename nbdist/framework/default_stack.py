"""A per-thread stack of defaults (TF's ``_DefaultStack``): the default graph
and the default session are each kept in one.

Each thread has its own stack, so a new thread starts empty: it sees the
global default graph and no default session, whatever ``as_default`` blocks
other threads are in. Blocks must exit in the reverse order they were entered
(``AssertionError`` "Nesting violated ..." otherwise), unless a default is
entered with ``enforce_nesting=False`` (as ``InteractiveSession`` is).
"""

from __future__ import annotations

import contextlib
import threading


class DefaultStack(threading.local):
    """A thread-local stack; ``get_controller(x)`` pushes ``x`` for a ``with``."""

    def __init__(self):
        super().__init__()
        self.enforce_nesting = True
        self.stack: list = []

    def get_default(self):
        """The innermost default of this thread, or None."""
        return self.stack[-1] if self.stack else None

    def reset(self):
        self.stack = []

    def is_cleared(self) -> bool:
        return not self.stack

    @contextlib.contextmanager
    def get_controller(self, default, enforce_nesting: bool | None = None):
        """Makes ``default`` the innermost default of this thread in the block."""
        nesting = self.enforce_nesting if enforce_nesting is None else enforce_nesting
        self.stack.append(default)
        try:
            yield default
        finally:
            # The stack may have been reset inside the block.
            if self.stack:
                if nesting and any(d is default for d in self.stack):
                    if self.stack[-1] is not default:
                        raise AssertionError(
                            "Nesting violated for default stack of "
                            f"{type(default)} objects")
                    self.stack.pop()
                else:
                    for i in range(len(self.stack) - 1, -1, -1):
                        if self.stack[i] is default:
                            del self.stack[i]
                            break
