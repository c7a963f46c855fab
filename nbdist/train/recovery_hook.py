"""``RecoveryStoryHook``: the hook a ``MonitoredSession`` adds to tell the story
of its recoveries (``nbdist.distribute.recovery_events``): the global step
before a loss, the step a new session restored, when the lost steps were
done again."""

from __future__ import annotations

from nbdist.distribute.recovery_events import SessionStory
from nbdist.train.hooks import SessionRunArgs, SessionRunHook, _global_step_read

__all__ = ["RecoveryStoryHook", "story_for"]


class RecoveryStoryHook(SessionRunHook):
    """Feeds a ``SessionStory`` the global step (nothing without one)."""

    def __init__(self, story: SessionStory):
        self.story = story
        self._global_step_tensor = None

    def begin(self):
        try:
            self._global_step_tensor = _global_step_read()
        except RuntimeError:  # a finalized graph: the story goes without steps
            self._global_step_tensor = None

    def after_create_session(self, session, coord):
        step = None
        if self._global_step_tensor is not None:
            step = int(session.run(self._global_step_tensor))
        self.story.created(step)

    def before_run(self, run_context):
        if self._global_step_tensor is None:
            return None
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        if self._global_step_tensor is not None:
            self.story.step(int(run_values.results))


def story_for(session_creator, hooks) -> SessionStory:
    """The story of a monitored session made by ``session_creator``: published
    to its master's coordination service and to the hooks that listen
    (``on_recovery(event)``, e.g. ``ProgressBarHook``)."""
    listeners = [
        h.on_recovery for h in hooks if callable(getattr(h, "on_recovery", None))
    ]
    return SessionStory(
        getattr(session_creator, "_master", "") or "",
        getattr(session_creator, "_checkpoint_dir", None),
        listeners=listeners,
    )
