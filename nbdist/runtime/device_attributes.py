"""A task's devices: their names, what ``Session.list_devices()`` returns for
each, and how many of each type a ``ConfigProto``'s ``device_count`` asks for.

Besides its CPU devices a task may have *virtual GPU devices*
(``ConfigProto(device_count={"GPU": 2})``, ``LocalCluster(gpus_per_task=2)``,
``nbdist-server --num_gpus 2``): ``/device:GPU:0..N-1``, run by the same NumPy
kernels as the CPU, so a tower program written for ``/gpu:N`` places and runs
as written on a laptop. Ops with no device still go to CPU:0.

>>> task_devices("/job:worker/replica:0/task:0", num_cpus=1, num_gpus=2)[1:]
['/job:worker/replica:0/task:0/device:GPU:0', '/job:worker/replica:0/task:0/device:GPU:1']
>>> device_type_of("/job:worker/replica:0/task:0/device:GPU:1")
'GPU'
"""

from __future__ import annotations


class DeviceAttributes:
    """``name``, ``device_type``, ``memory_limit_bytes`` and ``incarnation``."""

    def __init__(self, name: str, device_type: str, incarnation: int,
                 memory_limit_bytes: int = 0):
        self.name = name
        self.device_type = device_type
        self.incarnation = incarnation
        self.memory_limit_bytes = memory_limit_bytes

    def __repr__(self) -> str:
        return (f"_DeviceAttributes({self.name}, {self.device_type}, "
                f"{self.memory_limit_bytes}, {self.incarnation})")


def device_counts(config) -> dict[str, int]:
    """``{"num_cpus": n, "num_gpus": m}`` from ``config.device_count`` (at least
    one CPU; no GPU unless asked), the keywords ``Worker`` takes."""
    counts = config.device_count if config is not None else {}
    return {"num_cpus": max(1, int(counts.get("CPU", 1))),
            "num_gpus": max(0, int(counts.get("GPU", 0)))}


def task_devices(task_name: str, num_cpus: int = 1, num_gpus: int = 0) -> list[str]:
    """The full names of a task's devices: its CPUs, then its virtual GPUs."""
    return ([f"{task_name}/device:CPU:{i}" for i in range(max(1, num_cpus))]
            + [f"{task_name}/device:GPU:{i}" for i in range(num_gpus)])


def device_type_of(name: str) -> str:
    """``"GPU"`` for ``.../device:GPU:1``; the type part of a full device name."""
    return name.rpartition("/device:")[2].partition(":")[0].upper() or "CPU"
