"""TF1 programs read flags before ``app.run``.

* ``tf.app.flags.FLAGS.job_name`` read at module level parses ``sys.argv`` on
  first access (TF's ``_FlagValuesWrapper``); flags nobody defined are left for
  ``app.run``, which still parses and passes them in ``argv`` to ``main``.
* ``nd.flags``, ``nd.app.flags``, ``nd.compat.v1.flags`` and
  ``nd.compat.v1.app.flags`` are one module with one ``FLAGS``.
* TF1's ``DEFINE_*`` (also with its old keywords ``flag_name``,
  ``default_value``, ``docstring``, and ``flag_values=tf.flags.FLAGS``).
* A program that defines a flag absl's own modules define (``log_dir``, ``v``
  from ``absl.logging``) runs, with its definition (TF <= 1.13 accepted it);
  a flag the program defines twice is still absl's ``DuplicateFlagError``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from absl import flags as absl_flags

import nbdist as nd

# Not the checkout: `python -c` puts the working directory first on sys.path, and
# the scripts must import the nbdist on PYTHONPATH (or installed).
CWD = Path(__file__).resolve().parents[1]

_SCRIPT = """
import nbdist as nd
flags = {alias}
flags.DEFINE_string("job_name", "", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task in its job")
flags.DEFINE_float("learning_rate", 0.5, "step size")
FLAGS = flags.FLAGS
print("module", repr(FLAGS.job_name), FLAGS.task_index, FLAGS.learning_rate)
flags.DEFINE_boolean("late", False, "defined after the first read")

def main(argv):
    print("main", argv[1:], repr(FLAGS.job_name), FLAGS.task_index, FLAGS.late)
    return 3

nd.app.run({run_args})
"""


def run_script(*argv, alias="nd.app.flags", run_args="main"):
    code = _SCRIPT.format(alias=alias, run_args=run_args)
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                          text=True, timeout=120, cwd=CWD, check=False)


@pytest.mark.parametrize("alias", ["nd.app.flags", "nd.compat.v1.app.flags",
                                   "nd.flags", "nd.compat.v1.flags"])
def test_flags_read_at_module_level_parse_sys_argv(alias):
    p = run_script("--job_name=ps", "--task_index=1", "--unknown=3", "--late", "pos",
                   alias=alias)
    assert p.returncode == 3, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "module 'ps' 1 0.5", p.stdout
    # app.run parses again (now `--late` is known) and leaves the unknown flag
    # and the positional argument in main's argv, as TF1's app.run.
    assert lines[1] == "main ['--unknown=3', 'pos'] 'ps' 1 True", p.stdout


def test_module_level_read_without_arguments_gives_the_defaults():
    p = run_script()
    assert p.returncode == 3, p.stderr
    assert p.stdout.splitlines() == ["module '' 0 0.5", "main [] '' 0 False"]


def test_app_run_with_explicit_argv_parses_that_argv():
    p = run_script("--job_name=ignored",
                   run_args="main, argv=['prog', '--task_index=4', '--x=1', 'a']")
    assert p.returncode == 3, p.stderr
    # The module-level read parsed sys.argv; run() re-parses the argv it is given.
    assert p.stdout.splitlines()[1] == "main ['--x=1', 'a'] 'ignored' 4 False"


def test_a_bad_value_for_a_known_flag_is_an_error_on_first_read():
    p = run_script("--task_index=notanumber")
    assert p.returncode != 0
    assert "task_index" in p.stderr and "IllegalFlagValueError" in p.stderr, p.stderr


def test_all_flags_aliases_are_one_module_with_one_FLAGS():
    assert nd.app.flags is nd.flags
    assert nd.compat.v1.flags is nd.flags
    assert nd.compat.v1.app.flags is nd.flags
    assert nd.compat.v1.app.flags.FLAGS is nd.flags.FLAGS
    assert nd.flags.UnparsedFlagAccessError is absl_flags.UnparsedFlagAccessError
    for name in ("DEFINE_string", "DEFINE_integer", "DEFINE_float", "DEFINE_bool",
                 "DEFINE_boolean", "DEFINE_list", "DEFINE_enum",
                 "DEFINE_multi_string", "mark_flag_as_required", "FlagValues"):
        assert callable(getattr(nd.flags, name)), name


def test_define_functions_take_tf1_keywords_and_the_wrapped_FLAGS():
    fv = absl_flags.FlagValues()
    nd.flags.DEFINE_string(flag_name="ps_hosts", default_value="h:1",
                           docstring="ps addresses", flag_values=fv)
    nd.flags.DEFINE_integer("steps", 10, "number of steps", flag_values=fv)
    nd.flags.DEFINE_list("workers", ["a", "b"], "worker names", flag_values=fv)
    fv(["prog", "--steps=7"])
    assert (fv.ps_hosts, fv.steps, fv.workers) == ("h:1", 7, ["a", "b"])
    assert fv["ps_hosts"].help == "ps addresses"

    # flag_values=tf.flags.FLAGS (the parsing wrapper) defines in the real FLAGS.
    nd.flags.DEFINE_string("nd_test_wrapped_flag", "dflt", "a flag",
                           flag_values=nd.flags.FLAGS)
    try:
        assert "nd_test_wrapped_flag" in absl_flags.FLAGS
        assert "nd_test_wrapped_flag" in nd.flags.FLAGS
        assert nd.flags.FLAGS["nd_test_wrapped_flag"].default == "dflt"
    finally:
        delattr(absl_flags.FLAGS, "nd_test_wrapped_flag")


def test_setting_a_flag_value_through_the_wrapper():
    nd.flags.DEFINE_integer("nd_test_settable", 1, "a flag")
    try:
        nd.flags.FLAGS.nd_test_settable = 5
        # (read through the Flag objects: reading a value would parse pytest's argv)
        assert absl_flags.FLAGS["nd_test_settable"].value == 5
        assert nd.flags.FLAGS["nd_test_settable"].value == 5
    finally:
        delattr(nd.flags.FLAGS, "nd_test_settable")


_REDEFINING = """
import nbdist as nd
tf = nd.compat.v1
tf.app.flags.DEFINE_string("log_dir", "/tmp/program_default", "the program's logs")
tf.app.flags.DEFINE_integer("v", 3, "the program's own v")
FLAGS = tf.app.flags.FLAGS

def main(argv):
    print(FLAGS.log_dir, FLAGS.v, FLAGS["log_dir"].help, argv[1:])

tf.app.run()
"""


def test_program_redefining_absl_logging_flags_runs_with_its_definitions():
    p = subprocess.run([sys.executable, "-c", _REDEFINING, "--log_dir=/tmp/run1",
                        "--v=5", "pos"], capture_output=True, text=True,
                       timeout=120, cwd=CWD, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == "/tmp/run1 5 the program's logs ['pos']"


def test_a_flag_the_program_defines_twice_is_still_an_error():
    fv = absl_flags.FlagValues()
    nd.flags.DEFINE_string("twice", "a", "first", flag_values=fv)
    with pytest.raises(absl_flags.DuplicateFlagError, match="twice"):
        nd.flags.DEFINE_string("twice", "b", "second", flag_values=fv)
