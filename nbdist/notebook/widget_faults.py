"""The fault buttons under ``ClusterView``: slow a task or a link, cut a link,
heal (the code of ``%cluster slow/partition/heal``, ``notebook.fault_control``).
Enabled only on a live view of a cluster this notebook owns."""

from __future__ import annotations

import threading

from nbdist.notebook import control

__all__ = ["fault_bar"]

_EVERY_PEER = "(every peer)"


def fault_bar(view, w):
    """An ``ipywidgets`` row acting on ``view``'s cluster through ``view.slow``,
    ``view.partition`` and ``view.heal`` (each recorded in its history)."""
    tasks = control.task_names(view.cluster)
    owned = getattr(view.cluster, "owned", True) and hasattr(view.cluster, "kill")
    task = w.Dropdown(options=tasks, description="fault:",
                      layout=w.Layout(width="190px"))
    peer = w.Dropdown(options=[_EVERY_PEER] + tasks, description="link to",
                      layout=w.Layout(width="210px"))
    delay = w.Text(value="20ms", layout=w.Layout(width="70px"))
    buttons = []

    def act(name, fn):
        def run():
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - shown in the view
                view._say(f"{name} failed: {str(e).splitlines()[0]}")

        threading.Thread(target=run, daemon=True, name=f"nbdist-{name}").start()

    def on_slow(_b):
        other = None if peer.value == _EVERY_PEER else peer.value
        act("slow", lambda: view.slow(task.value, delay.value, other))

    def on_partition(_b):
        if peer.value == _EVERY_PEER:
            view._say("partition needs a peer: pick the other end of the link")
            return
        act("partition", lambda: view.partition(task.value, peer.value))

    def on_heal(_b):
        act("heal", view.heal)

    for name, icon, handler in (("slow", "hourglass-half", on_slow),
                                ("partition", "cut", on_partition),
                                ("heal", "medkit", on_heal)):
        b = w.Button(description=name, icon=icon, tooltip=f"%cluster {name}",
                     disabled=not owned, layout=w.Layout(width="100px", height="26px"))
        b.add_class(f"nbdist-{name}")
        b.on_click(handler)
        buttons.append(b)
    view._fault_buttons = buttons  # enabled and disabled with kill/restart
    box = w.HBox([task, peer, delay, *buttons])
    box.add_class("nbdist-fault-bar")
    return box
