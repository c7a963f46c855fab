"""Device specifications: ``/job:J/replica:R/task:T/device:TYPE:N``.

The same parsing, printing and merging rules as TensorFlow 1.x's
``tf.DeviceSpec`` (``DeviceSpecV1``) and ``pydev.merge_device``. nbdist only has
CPU devices; other device types parse (so that TF code reads unchanged) and are
rejected later, at placement.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "DeviceSpec",
    "MergeDevice",
    "canonical_name",
    "check_valid",
    "merge_device",
]

# Device types accepted in the short forms "/cpu:0" and "GPU:1" (TF's list).
_SHORTHAND_DEVICE_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})

_EXPECTED = (
    "expected a device spec like '/job:<name>/replica:<id>/task:<id>"
    "/device:<type>:<id>' (every part optional), '/cpu:0' or 'CPU:0'"
)


def _as_str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _as_int_or_none(value: Any, field: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"Invalid {field} {value!r}: expected an integer or None"
        ) from None


def _as_device_type_or_none(device_type: Any) -> str | None:
    # TF accepts lowercase "cpu" and "gpu" for backwards compatibility only.
    if device_type in ("cpu", "gpu"):
        return device_type.upper()
    return _as_str_or_none(device_type)


def _parse_int(text: str, field: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"invalid literal for int() with base 10: {text!r} (the {field} in "
            f"device spec {spec!r}; expected an integer)"
        ) from None


def _multiple_types(spec: str) -> str:
    return (
        f"Multiple device types are not allowed while parsing the device spec: {spec}."
    )


@functools.lru_cache(maxsize=4096)
def _string_to_components(
    spec: str,
) -> tuple[str | None, int | None, int | None, str | None, int | None]:
    job = replica = task = device_type = device_index = None
    for part in spec.split("/"):
        y = part.split(":")
        ly = len(y)
        if ly == 2 and y[0] == "job":
            job = y[1]
        elif ly == 2 and y[0] == "replica":
            replica = _parse_int(y[1], "replica", spec)
        elif ly == 2 and y[0] == "task":
            task = _parse_int(y[1], "task index", spec)
        elif ly in (1, 2) and y[0].upper() in _SHORTHAND_DEVICE_TYPES:
            if device_type is not None:
                raise ValueError(_multiple_types(spec))
            device_type = y[0].upper()
            if ly == 2 and y[1] != "*":
                device_index = _parse_int(y[1], "device index", spec)
        elif ly == 3 and y[0] == "device":
            if device_type is not None:
                raise ValueError(_multiple_types(spec))
            device_type = _as_device_type_or_none(y[1])
            if y[2] != "*":
                if not y[2].isdigit():
                    raise ValueError(
                        f"invalid literal for int: {spec} (device index "
                        f"{y[2]!r}; expected a non-negative integer or '*')"
                    )
                device_index = int(y[2])
        elif y[0] != "":
            raise ValueError(
                f"Unknown attribute '{y[0]}' is encountered while parsing the "
                f"device spec: '{spec}'; {_EXPECTED}"
            )
    return job, replica, task, device_type, device_index


def _components_to_string(
    job: str | None,
    replica: int | None,
    task: int | None,
    device_type: str | None,
    device_index: int | None,
) -> str:
    out = []
    if job is not None:
        out.append("/job:" + job)
    if replica is not None:
        out.append(f"/replica:{replica}")
    if task is not None:
        out.append(f"/task:{task}")
    if device_type is not None:
        index = "*" if device_index is None else str(device_index)
        out.append(f"/device:{device_type}:{index}")
    return "".join(out)


class DeviceSpec:
    """A (possibly partial) device: job, replica, task, device type and index.

    Mutable, like TensorFlow 1.x's ``tf.DeviceSpec``. Unset parts are ``None``;
    ``to_string()`` omits them. Two specs are equal when their strings are.

    Example:
        >>> spec = DeviceSpec.from_string("/job:ps/task:0/cpu:0")
        >>> spec.to_string()
        '/job:ps/task:0/device:CPU:0'
        >>> spec.merge_from(DeviceSpec(task=3))
        >>> spec.task_name()
        '/job:ps/replica:0/task:3'
    """

    __slots__ = ("_device_index", "_device_type", "_job", "_replica", "_task")

    def __init__(
        self,
        job: str | None = None,
        replica: int | None = None,
        task: int | None = None,
        device_type: str | None = None,
        device_index: int | None = None,
    ) -> None:
        self.job = job
        self.replica = replica
        self.task = task
        self.device_type = device_type
        self.device_index = device_index

    # -- fields ---------------------------------------------------------------

    @property
    def job(self) -> str | None:
        return self._job

    @job.setter
    def job(self, job: str | None) -> None:
        self._job = _as_str_or_none(job)

    @property
    def replica(self) -> int | None:
        return self._replica

    @replica.setter
    def replica(self, replica: int | None) -> None:
        self._replica = _as_int_or_none(replica, "replica")

    @property
    def task(self) -> int | None:
        return self._task

    @task.setter
    def task(self, task: int | None) -> None:
        self._task = _as_int_or_none(task, "task index")

    @property
    def device_type(self) -> str | None:
        return self._device_type

    @device_type.setter
    def device_type(self, device_type: str | None) -> None:
        self._device_type = _as_device_type_or_none(device_type)

    @property
    def device_index(self) -> int | None:
        return self._device_index

    @device_index.setter
    def device_index(self, device_index: int | None) -> None:
        self._device_index = _as_int_or_none(device_index, "device index")

    # -- parsing and printing -------------------------------------------------

    @classmethod
    def from_string(cls, spec: str | DeviceSpec | None) -> DeviceSpec:
        """Parses ``spec`` (``None`` and ``""`` give an empty spec).

        Raises:
          ValueError: if ``spec`` is not a valid device spec.
        """
        return cls().parse_from_string(spec)

    def parse_from_string(self, spec: str | DeviceSpec | None) -> DeviceSpec:
        """Replaces every field with those parsed from ``spec``; returns self."""
        if isinstance(spec, DeviceSpec):
            spec = spec.to_string()
        if spec is None:
            spec = ""
        if not isinstance(spec, str):
            raise TypeError(
                f"A device spec must be a string or a DeviceSpec, got "
                f"{type(spec).__name__}: {spec!r}"
            )
        (
            self._job,
            self._replica,
            self._task,
            self._device_type,
            self._device_index,
        ) = _string_to_components(spec)
        return self

    def to_string(self) -> str:
        """The canonical ``/job:J/replica:R/task:T/device:TYPE:N`` form."""
        return _components_to_string(
            self._job, self._replica, self._task, self._device_type, self._device_index
        )

    # -- merging --------------------------------------------------------------

    def _merged_fields(self, dev: DeviceSpec) -> tuple:
        return (
            dev.job if dev.job is not None else self.job,
            dev.replica if dev.replica is not None else self.replica,
            dev.task if dev.task is not None else self.task,
            dev.device_type if dev.device_type is not None else self.device_type,
            dev.device_index if dev.device_index is not None else self.device_index,
        )

    def merge_from(self, dev: DeviceSpec) -> None:
        """Sets every field that ``dev`` sets (``dev`` takes precedence)."""
        (
            self._job,
            self._replica,
            self._task,
            self._device_type,
            self._device_index,
        ) = self._merged_fields(dev)

    def make_merged_spec(self, dev: DeviceSpec) -> DeviceSpec:
        """A new spec: this one with the fields ``dev`` sets overridden."""
        return self.__class__(*self._merged_fields(dev))

    def replace(self, **kwargs: Any) -> DeviceSpec:
        """A new spec with the given constructor arguments overridden."""
        fields = {
            "job": self.job,
            "replica": self.replica,
            "task": self.task,
            "device_type": self.device_type,
            "device_index": self.device_index,
        }
        fields.update(kwargs)
        return self.__class__(**fields)

    # -- nbdist helpers -------------------------------------------------------

    def is_full(self) -> bool:
        """Whether all five fields are set (a concrete device)."""
        return None not in (
            self._job,
            self._replica,
            self._task,
            self._device_type,
            self._device_index,
        )

    def task_name(self) -> str:
        """The task part, ``/job:J/replica:R/task:T`` (replica defaults to 0).

        Raises:
          ValueError: if the job or the task is not set.
        """
        if self._job is None or self._task is None:
            raise ValueError(
                f"Device spec {self.to_string()!r} does not name a task: "
                "both /job:<name> and /task:<id> are needed"
            )
        replica = 0 if self._replica is None else self._replica
        return f"/job:{self._job}/replica:{replica}/task:{self._task}"

    # -- dunder ---------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.__class__) and (
            self.to_string() == other.to_string()
        )

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return f"DeviceSpec.from_string({self.to_string()!r})"


def check_valid(spec: str) -> None:
    """Raises ``ValueError`` if ``spec`` is not a valid device spec string."""
    DeviceSpec.from_string(spec)


def canonical_name(device: str | DeviceSpec | None) -> str:
    """The canonical string of a device spec or device name.

    Example:
        >>> canonical_name("/cpu:0")
        '/device:CPU:0'
        >>> canonical_name(None)
        ''
    """
    if device is None:
        return ""
    if isinstance(device, DeviceSpec):
        return device.to_string()
    return DeviceSpec.from_string(device).to_string()


class MergeDevice:
    """A device function that merges a (partial) spec into an op's device.

    The op's own device (set by inner scopes, which run first) takes precedence
    field by field; this spec fills in the fields it leaves unset. It is what
    ``Graph.device("...")`` pushes for a string or a ``DeviceSpec``.

    Example:
        >>> fn = MergeDevice("/job:worker/device:CPU:0")
        >>> fn("/task:1").to_string()
        '/job:worker/task:1/device:CPU:0'
    """

    __slots__ = ("_spec",)

    def __init__(self, spec: str | DeviceSpec | None) -> None:
        # Copy: a DeviceSpec is mutable and the scope must not change with it.
        self._spec = DeviceSpec.from_string(spec)

    @property
    def spec(self) -> DeviceSpec:
        return self._spec.replace()

    @property
    def is_null_merge(self) -> bool:
        """Whether merging changes nothing (the spec is empty)."""
        return not self._spec.to_string()

    def __call__(self, node_def: Any) -> DeviceSpec:
        """Merges into ``node_def.device`` (or a device string or spec)."""
        current = DeviceSpec.from_string(_current_device(node_def))
        return self._spec.make_merged_spec(current)

    def string_merge(self, node_def: Any) -> str:
        """Like calling this, but returns the canonical string (cached)."""
        return _string_merge(self._spec.to_string(), _current_device(node_def))

    def __repr__(self) -> str:
        return f"MergeDevice({self._spec.to_string()!r})"


def _current_device(node_def: Any) -> str:
    if node_def is None or isinstance(node_def, str):
        return node_def or ""
    if isinstance(node_def, DeviceSpec):
        return node_def.to_string()
    return node_def.device or ""


@functools.lru_cache(maxsize=4096)
def _string_merge(outer: str, inner: str) -> str:
    merged = DeviceSpec.from_string(outer)
    merged.merge_from(DeviceSpec.from_string(inner))
    return merged.to_string()


def merge_device(spec: str | DeviceSpec | None) -> MergeDevice:
    """Returns a device function that merges ``spec`` under inner scopes' specs.

    The innermost setting of each field wins, as in TensorFlow.

    Example:
        >>> outer = merge_device("/device:CPU:0")
        >>> inner = merge_device("/job:worker")
        >>> outer(inner("")).to_string()
        '/job:worker/device:CPU:0'

    Raises:
      ValueError: if ``spec`` is not a valid device spec.
    """
    return MergeDevice(spec)
