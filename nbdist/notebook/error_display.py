"""How an ``nd.errors.OpError`` reads in IPython once ``%load_ext nbdist`` ran:
its class and the first lines of its message, where the op it names was built
("Cell In[3], line 2", as TF's "Original stack trace for op") and what to do
about it, instead of a traceback through nbdist's session and RPC code; ``%tb``
shows that full traceback.
"""

from __future__ import annotations

import sys

from nbdist import errors
from nbdist.framework import op_site

TB_HINT = "(%tb shows the full traceback)"


def short_form(e: errors.OpError) -> str:
    """``Class: message`` without the runtime's ``[[...]]`` annotation lines and
    with only its first paragraph, then the creation site and advice the
    Session added."""
    message = str(e).strip() or type(e).__name__
    head, sep, trailer = message.partition("\n\n" + op_site.TRACE_HEADING)
    lines = [
        line
        for line in head.split("\n\n")[0].splitlines()
        if not line.lstrip().startswith("[[")
    ]
    if sep:
        lines += [line for line in (sep + trailer).splitlines() if line.strip()]
    return f"{type(e).__name__}: " + "\n".join(lines) + "\n" + TB_HINT


def _show_op_error(shell, etype, value, tb, tb_offset=None):
    # What showtraceback() records, so that %tb and %debug find this error.
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    stb = [short_form(value)]
    shell._showtraceback(etype, value, stb)
    if shell.call_pdb:  # %pdb on: as showtraceback() does
        shell.debugger(force=True)
    return stb


def register(shell) -> None:
    """Shows OpErrors in their short form in ``shell`` and names its cells in
    the creation sites of ops."""
    shell.set_custom_exc((errors.OpError,), _show_op_error)
    op_site.set_file_labeler(lambda filename: _cell_label(shell, filename))


def unregister(shell) -> None:
    if errors.OpError in shell.custom_exceptions:
        shell.set_custom_exc((), None)
    op_site.set_file_labeler(None)


def _cell_label(shell, filename: str) -> str | None:
    """The label IPython gives the file it compiled a cell as ("Cell In[3]"),
    else None."""
    fmt = getattr(shell.compile, "format_code_name", None)
    named = fmt(filename) if fmt is not None else None
    return " ".join(named) if named else None
