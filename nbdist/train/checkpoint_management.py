"""The ``checkpoint`` state file and the files of a checkpoint on disk
(TF's ``checkpoint_management``): which checkpoints a directory holds, the
newest, their modification times, and removing them.

A checkpoint prefix ``P`` names either format nbdist reads: ``P.npz``
(``npz_format``) or TF's V2 bundle ``P.index`` + ``P.data-*``
(``tensor_bundle``). Paths may be given as ``file://`` URLs.
"""

from __future__ import annotations

import glob
import logging
import os

from nbdist.train.file_io import atomic_write as _atomic_write
from nbdist.train.file_io import local_path
from nbdist.train.npz_format import DATA_SUFFIX
from nbdist.train.tensor_bundle import INDEX_SUFFIX

_log = logging.getLogger(__name__)


# -- checkpoint state -----------------------------------------------------------
class CheckpointState:
    """TF's ``CheckpointState``: the ``checkpoint`` file's contents."""

    def __init__(self, model_checkpoint_path="", all_model_checkpoint_paths=(),
                 all_model_checkpoint_timestamps=(), last_preserved_timestamp=0.0):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)
        self.all_model_checkpoint_timestamps = list(all_model_checkpoint_timestamps)
        self.last_preserved_timestamp = float(last_preserved_timestamp)

    def to_text(self) -> str:
        from google.protobuf import text_encoding

        def q(s):
            return '"' + text_encoding.CEscape(s, as_utf8=True) + '"'

        lines = [f"model_checkpoint_path: {q(self.model_checkpoint_path)}"]
        lines += [f"all_model_checkpoint_paths: {q(p)}"
                  for p in self.all_model_checkpoint_paths]
        lines += [f"all_model_checkpoint_timestamps: {t!r}"
                  for t in self.all_model_checkpoint_timestamps]
        if self.last_preserved_timestamp:
            lines.append(f"last_preserved_timestamp: {self.last_preserved_timestamp!r}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_text(cls, text: str) -> CheckpointState:
        from google.protobuf import text_encoding

        ckpt = cls()
        for lineno, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if not sep:
                raise ValueError(f"line {lineno}: expected 'field: value'")
            if key in ("model_checkpoint_path", "all_model_checkpoint_paths"):
                if len(value) < 2 or value[0] != value[-1] or value[0] not in "\"'":
                    raise ValueError(f"line {lineno}: {key} needs a quoted string")
                s = text_encoding.CUnescape(value[1:-1]).decode("utf-8")
                if key == "model_checkpoint_path":
                    ckpt.model_checkpoint_path = s
                else:
                    ckpt.all_model_checkpoint_paths.append(s)
            elif key == "all_model_checkpoint_timestamps":
                ckpt.all_model_checkpoint_timestamps.append(float(value))
            elif key == "last_preserved_timestamp":
                ckpt.last_preserved_timestamp = float(value)
            else:
                raise ValueError(f"line {lineno}: unknown field '{key}'")
        return ckpt

    def __repr__(self) -> str:
        return self.to_text()

    def __eq__(self, other):
        return isinstance(other, CheckpointState) and vars(self) == vars(other)


def _checkpoint_filename(save_dir, latest_filename):
    return os.path.join(save_dir, latest_filename or "checkpoint")


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                    all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None):
    all_paths = list(all_model_checkpoint_paths or [])
    if not all_paths or all_paths[-1] != model_checkpoint_path:
        all_paths.append(model_checkpoint_path)
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        all_paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir)
                     for p in all_paths]
    return CheckpointState(model_checkpoint_path, all_paths,
                           all_model_checkpoint_timestamps or [],
                           last_preserved_timestamp or 0.0)


def update_checkpoint_state(save_dir, model_checkpoint_path,
                            all_model_checkpoint_paths=None, latest_filename=None,
                            all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None, save_relative_paths=False):
    """Writes the ``checkpoint`` state file of ``save_dir`` (atomically)."""
    save_dir = local_path(save_dir)
    model_checkpoint_path = local_path(model_checkpoint_path)
    coord = _checkpoint_filename(save_dir, latest_filename)
    all_paths = list(all_model_checkpoint_paths or [])
    if save_relative_paths:
        model_checkpoint_path = (os.path.relpath(model_checkpoint_path, save_dir)
                                 if os.path.isabs(model_checkpoint_path)
                                 else model_checkpoint_path)
        all_paths = [os.path.relpath(p, save_dir) if os.path.isabs(p) else p
                     for p in all_paths]
    ckpt = generate_checkpoint_state_proto(
        save_dir, model_checkpoint_path, all_paths,
        all_model_checkpoint_timestamps, last_preserved_timestamp)
    if coord == ckpt.model_checkpoint_path:
        raise RuntimeError(f"Save path '{model_checkpoint_path}' conflicts with path "
                           "used for checkpoint state.  Please use a different save "
                           "path.")
    text = ckpt.to_text().encode("utf-8")
    _atomic_write(coord, lambda f: f.write(text))


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
    """The ``CheckpointState`` of ``checkpoint_dir``, or None if there is none.

    Relative paths in the file are joined to ``checkpoint_dir``.
    """
    checkpoint_dir = local_path(checkpoint_dir)
    coord = _checkpoint_filename(checkpoint_dir, latest_filename)
    try:
        with open(coord, encoding="utf-8") as f:
            content = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        _log.warning("%s: Checkpoint ignored", e)
        return None
    try:
        ckpt = CheckpointState.from_text(content)
    except (ValueError, UnicodeDecodeError) as e:
        _log.warning("%s: Checkpoint ignored (%s)", coord, e)
        return None
    if not ckpt.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
    if not os.path.isabs(ckpt.model_checkpoint_path):
        ckpt.model_checkpoint_path = os.path.join(checkpoint_dir,
                                                  ckpt.model_checkpoint_path)
    ckpt.all_model_checkpoint_paths = [
        p if os.path.isabs(p) else os.path.join(checkpoint_dir, p)
        for p in ckpt.all_model_checkpoint_paths]
    return ckpt


def data_files(checkpoint_prefix) -> list[str]:
    """The files holding the values of the checkpoint ``checkpoint_prefix``
    (``.npz``, or ``.index`` and ``.data-*``) that exist."""
    prefix = local_path(checkpoint_prefix)
    out = [prefix + DATA_SUFFIX] if os.path.isfile(prefix + DATA_SUFFIX) else []
    if os.path.isfile(prefix + INDEX_SUFFIX):
        out.append(prefix + INDEX_SUFFIX)
        out += sorted(glob.glob(glob.escape(prefix) + ".data-?????-of-?????"))
    return out


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint with this prefix exists (its ``.npz``, or TF's
    ``.index``); as in TF, also true for the name (or glob pattern) of any
    existing file, e.g. one a checkpoint wrote."""
    prefix = local_path(checkpoint_prefix)
    if data_files(prefix):
        return True
    return any(os.path.isfile(p) for p in glob.glob(prefix))


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The prefix of the newest checkpoint in ``checkpoint_dir``, or None."""
    checkpoint_dir = local_path(checkpoint_dir)
    ckpt = get_checkpoint_state(checkpoint_dir, latest_filename)
    if ckpt and ckpt.model_checkpoint_path:
        if data_files(ckpt.model_checkpoint_path):
            return ckpt.model_checkpoint_path
        _log.error("Couldn't match files for checkpoint %s",
                   ckpt.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    out = []
    for p in checkpoint_prefixes:
        files = data_files(p)
        try:
            out.append(os.stat(files[0]).st_mtime)
        except (OSError, IndexError):
            continue
    return out


def remove_checkpoint(checkpoint_prefix, meta_graph_suffix="meta"):
    """Deletes the files of a checkpoint (data, in either format, and meta
    graph)."""
    checkpoint_prefix = local_path(checkpoint_prefix)
    for path in data_files(checkpoint_prefix) + [
            checkpoint_prefix + "." + meta_graph_suffix]:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def _in_directory(path, directory):
    """``path`` as this directory's saves name it, when it is in ``directory``."""
    if os.path.abspath(os.path.dirname(path)) == os.path.abspath(directory or "."):
        return os.path.join(directory, os.path.basename(path))
    return path


def meta_graph_filename(checkpoint_filename, meta_graph_suffix="meta"):
    return checkpoint_filename + "." + meta_graph_suffix

