# SPDX-License-Identifier: MIT
"""PythonProfiler: the host-IR operations of the executions in a block,
with their host and device times, from torch.profiler."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

_PREFIX = "mdfuser::"
# Host statements that post a collective (one per collective, as a
# collective is one kernel; its Wait is host work).
_COMMUNICATION = {"Communication"}


@dataclass
class KernelProfile:
    """One host-IR statement as it ran: its name (``linear``,
    ``Communication``, ``Wait`` ...), ``scheduler`` ("communication" for
    the statement posting a collective, "host_ir" for the rest, waits
    included), host time and the
    device time of the kernels it launched (0 on the CPU)."""

    name: str
    scheduler: str
    host_time_ms: float
    time_ms: float
    device: str
    stream: int = 0
    segment_id: int = 0
    correlation_id: int = 0


@dataclass
class FusionProfile:
    """What a PythonProfiler recorded: one KernelProfile per host-IR
    statement run (loop bodies once per iteration), and the totals."""

    kernel_profiles: list[KernelProfile] = field(default_factory=list)
    host_time_ms: float = 0.0
    kernel_time_ms: float = 0.0
    segments: int = 1

    @property
    def cuda_evt_time_ms(self) -> float:
        return self.kernel_time_ms


class PythonProfiler:
    """Records every host-IR statement that ``execute`` runs inside it::

        with PythonProfiler() as prof:
            fd.execute(inputs)
        for kp in prof.profile.kernel_profiles:
            print(kp.name, kp.scheduler, kp.host_time_ms, kp.time_ms)

    Device times need CUDA; they are the kernels each statement launched,
    attributed by torch.profiler.
    """

    def __init__(self, auto_scheduled: bool = True) -> None:
        del auto_scheduled  # nvFuser's switch; mdfuser has one scheduler
        self._torch_profile: profile | None = None
        self._profile: FusionProfile | None = None

    def __enter__(self) -> PythonProfiler:
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self._torch_profile = profile(activities=activities)
        self._torch_profile.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        assert self._torch_profile is not None
        self._torch_profile.__exit__(*exc_info)
        self._profile = self._collect(self._torch_profile)

    def reset(self) -> None:
        self._profile = None

    @property
    def profile(self) -> FusionProfile:
        if self._profile is None:
            raise RuntimeError("PythonProfiler: nothing was profiled; use it as a context manager")
        return self._profile

    @staticmethod
    def _collect(prof: profile) -> FusionProfile:
        result = FusionProfile()
        for event in prof.events():
            # On CUDA each range also appears as a device-side annotation;
            # the host range carries the device time of its kernels.
            if not event.name.startswith(_PREFIX) or event.device_type != DeviceType.CPU:
                continue
            name = event.name[len(_PREFIX) :]
            if name == "ForLoop":
                continue  # its body's statements are recorded on their own
            host_ms = event.cpu_time_total / 1000.0
            device_ms = getattr(event, "device_time_total", 0.0) / 1000.0
            result.kernel_profiles.append(
                KernelProfile(
                    name=name,
                    scheduler="communication" if name in _COMMUNICATION else "host_ir",
                    host_time_ms=host_ms,
                    time_ms=device_ms,
                    device="cuda" if device_ms > 0 else "cpu",
                    correlation_id=event.id,
                )
            )
            result.host_time_ms += event.self_cpu_time_total / 1000.0
            result.kernel_time_ms += device_ms
        return result
