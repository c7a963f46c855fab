"""``nd.app``: TF1's ``tf.app`` on absl-py: ``nd.app.flags`` (``nd.flags``:
absl's flags whose ``FLAGS`` parses ``sys.argv`` on first read) and ``nd.app.run``.

    import nbdist as nd

    flags = nd.app.flags
    flags.DEFINE_string("job_name", "", "ps or worker")
    flags.DEFINE_integer("task_index", 0, "index of the task in its job")
    FLAGS = flags.FLAGS

    def main(argv):
        print(FLAGS.job_name, FLAGS.task_index, argv[1:])

    if __name__ == "__main__":
        nd.app.run()          # parses sys.argv, calls main(argv), exits

As TF1's, ``run`` tolerates flags nobody defined (they stay in ``argv``
for ``main``), and exits the process with ``main``'s return value.
"""

from __future__ import annotations

import sys

from absl import app as _absl_app

from nbdist import flags

__all__ = ["flags", "run"]


def _parse_flags_tolerate_undef(argv):
    # TF1's parser: unknown flags are left in argv instead of failing.
    return flags.FLAGS(argv, known_only=True)  # the wrapper forwards the call


def run(main=None, argv=None):
    """Parses the flags of ``argv`` (default ``sys.argv``), then calls
    ``main(argv)`` (default: the ``main`` of the ``__main__`` module) and
    exits with its return value (``SystemExit``), as ``tf.compat.v1.app.run``.

    >>> import nbdist as nd
    >>> try:
    ...     nd.app.run(lambda argv: len(argv), argv=["prog", "a", "b"])
    ... except SystemExit as e:
    ...     e.code
    3
    """
    main = main or sys.modules["__main__"].main
    _absl_app.run(main=main, argv=sys.argv if argv is None else argv,
                  flags_parser=_parse_flags_tolerate_undef)
