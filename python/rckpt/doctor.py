"""What rckpt sees of this machine's GPUs, and whether it can use them.

``rckpt.doctor()`` loads the CUDA driver the way a load onto a GPU would
(``rckpt doctor`` on the command line says the same) and compares, by UUID,
the devices torch sees in this process::

    report = rckpt.doctor()
    print(report)          # the text `rckpt doctor` prints, plus torch's view
    if not report.ok:
        raise SystemExit(report.problem)

``python -m rckpt doctor`` prints it and exits 0 when what exists is usable
(a machine without a GPU included), 6 otherwise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from . import _core

__all__ = ["DoctorDevice", "DoctorReport", "TorchView", "doctor"]


@dataclass(frozen=True)
class DoctorDevice:
    """One CUDA device as rckpt numbers it (cuda:N, the same N torch uses in
    this process)."""

    index: int
    uuid: str               # 8-4-4-4-12 hex; nvidia-smi adds a GPU-/MIG- prefix
    name: str
    memory_bytes: int       # a MIG instance: its slice
    pci_bus_id: str         # MIG instances share their GPU's
    compute_capability: Tuple[int, int]
    kernel_loads: bool      # False: byte-shuffled data is un-shuffled on the host
    kernel_note: str
    # Whether it was examined (this process's device, or every one with
    # all_devices=True); the kernel fields say nothing otherwise.
    examined: bool = True


@dataclass(frozen=True)
class TorchView:
    """The devices torch sees in this process, and whether they are rckpt's."""

    version: str
    cuda_available: bool
    uuids: List[str]
    matches: bool
    note: str


@dataclass(frozen=True)
class DoctorReport:
    rckpt_version: str
    cuda_built: bool
    kernel_image: str
    driver_library: str
    driver_path: str
    driver_version: int
    cuda_visible_devices: Optional[str]
    cuda_device_order: str
    devices: List[DoctorDevice]
    no_device_reason: str
    problem: Optional[str]          # None: usable (no GPU included)
    memlock_soft: Optional[int]     # None: unlimited
    memlock_hard: Optional[int]
    pinned_probe_bytes: int
    pinned_probe_error: Optional[str]
    host_memory_bytes: int
    host_memory_available: int
    torch: Optional[TorchView] = field(default=None)
    # The device examined (torch.cuda.current_device() when torch uses CUDA,
    # else the launcher's LOCAL_RANK, else 0); -1 with no GPU.
    current_device: int = -1
    all_devices: bool = False
    # The oldest driver the shipped kernel image loads on, and why.
    kernel_min_driver_version: int = 0
    kernel_min_driver_why: str = ""
    # What the process's CUDA runtime keeps between loads and saves
    # (rckpt.device_pool_stats()).
    device_pool: Dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when what exists is usable (also when there is no GPU)."""
        return self.problem is None

    def __str__(self) -> str:
        def size(n: Optional[int]) -> str:
            return "unlimited" if n is None else _core.human_bytes(n)

        lines = [f"rckpt {self.rckpt_version} "
                 + ("(CUDA runtime: the driver is loaded at run time)" if self.cuda_built
                    else "(built without its CUDA runtime)")]
        if self.cuda_built:
            lines.append(f"kernel image: {self.kernel_image}")
            if self.kernel_min_driver_version:
                v = self.kernel_min_driver_version
                lines.append(f"  needs a driver for CUDA {v // 1000}.{v % 1000 // 10} or newer: "
                             f"{self.kernel_min_driver_why}")
            driver = self.driver_path or f"{self.driver_library} (not loaded)"
            if self.driver_version:
                v = self.driver_version
                driver += f", CUDA {v // 1000}.{v % 1000 // 10} (cuDriverGetVersion {v})"
            lines.append(f"driver: {driver}")
        cvd = "unset" if self.cuda_visible_devices is None else repr(self.cuda_visible_devices)
        lines.append(f"CUDA_VISIBLE_DEVICES: {cvd}, CUDA_DEVICE_ORDER: "
                     f"{self.cuda_device_order or 'unset (FASTEST_FIRST)'}")
        if not self.devices:
            lines.append("devices: none" + (f" ({self.no_device_reason})" if self.no_device_reason
                                            else ""))
        else:
            lines.append("devices:")
            buses = [d.pci_bus_id for d in self.devices]
            for d in self.devices:
                mig = ("  (a MIG instance: its GPU's bus, its slice of memory)"
                       if buses.count(d.pci_bus_id) > 1 else "")
                major, minor = d.compute_capability
                mine = "  (this process's device)" if d.index == self.current_device else ""
                lines.append(f"  cuda:{d.index}  {d.uuid}  {d.name}  "
                             f"{_core.human_bytes(d.memory_bytes)}  bus {d.pci_bus_id}  "
                             f"sm_{major}{minor}{mig}{mine}")
                if not d.examined:
                    lines.append("          not examined: not this process's device "
                                 "(doctor(all_devices=True) examines it)")
                    continue
                lines.append("          un-shuffle: on the device (kernel loaded)" if d.kernel_loads
                             else f"          un-shuffle: on the host ({d.kernel_note})")
        lines.append(f"host memory: {_core.human_bytes(self.host_memory_bytes)} "
                     f"({_core.human_bytes(self.host_memory_available)} available); locked-memory "
                     f"limit {size(self.memlock_soft)} (hard {size(self.memlock_hard)})")
        if self.pinned_probe_bytes:
            lines.append(f"pinned memory: {_core.human_bytes(self.pinned_probe_bytes)} "
                         + (f"allocated and freed through cuda:{self.current_device}'s context "
                            "(the staging ring a load uses)"
                            if self.pinned_probe_error is None
                            else f"could not be allocated: {self.pinned_probe_error}"))
        pool = self.device_pool
        if pool:
            lines.append(f"device pool: {_core.human_bytes(pool['pinned_bytes'])} pinned of a "
                         f"{_core.human_bytes(pool['pinned_cap'])} cap (RCKPT_PINNED_POOL_BYTES), "
                         f"{_core.human_bytes(pool['device_scratch_bytes'])} device scratch, "
                         f"{pool['streams']} streams, {pool['events']} events held for loads "
                         "and saves")
        if self.torch is not None:
            t = self.torch
            lines.append(f"torch {t.version}: {t.note}")
        lines.append("")
        if self.problem is not None:
            lines.append(f"PROBLEM: {self.problem}")
        elif not self.devices:
            lines.append('OK: no GPU here; model_device="auto" means cpu')
        else:
            n = len(self.devices)
            lines.append(f"OK: {n} usable CUDA device{'s' if n != 1 else ''}; "
                         'model_device="auto" means torch.cuda.current_device()')
        return "\n".join(lines)


def _normal_uuid(u: str) -> str:
    u = u.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if u.startswith(prefix):
            u = u[len(prefix):]
    return u


def _torch_view(devices: List[DoctorDevice]) -> Tuple[Optional[TorchView], Optional[str]]:
    """torch's devices in this process against rckpt's, by UUID and order."""
    try:
        import torch
    except ImportError:
        return None, None
    version = str(torch.__version__)
    if not torch.cuda.is_available():
        if devices:
            note = (f"cannot use CUDA (torch.cuda.is_available() is False) while rckpt sees "
                    f"{len(devices)} device(s): a CPU-only build of torch, or "
                    f"CUDA_VISIBLE_DEVICES changed after torch started")
            return TorchView(version, False, [], False, note), (
                "torch in this process cannot use CUDA while rckpt sees GPUs: CUDA tensors rckpt "
                "loads cannot be handed to torch; install a CUDA build of torch, or load with "
                'map_location="cpu"')
        return TorchView(version, False, [], True, "no CUDA, like rckpt"), None
    uuids = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        uuids.append(_normal_uuid(str(getattr(props, "uuid", ""))))
    ours = [_normal_uuid(d.uuid) for d in devices]
    if uuids == ours:
        return TorchView(version, True, uuids, True,
                         f"sees the same {len(uuids)} device(s) in the same order, by UUID"), None
    note = f"sees {len(uuids)} device(s) {uuids}, rckpt {len(ours)} {ours}"
    return TorchView(version, True, uuids, False, note), (
        f"torch and rckpt see different CUDA devices ({note}): check CUDA_VISIBLE_DEVICES and "
        "CUDA_DEVICE_ORDER are set before either starts, and that both load the same driver")


def _torch_current_device() -> int:
    """torch.cuda.current_device() where torch is imported and uses CUDA, else -1 (the C++
    side's own choice: the thread's context, LOCAL_RANK, cuda:0)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_device())
    except Exception:  # a broken CUDA build of torch: the comparison below says so
        pass
    return -1


def doctor(*, cuda_driver: str = "libcuda.so.1", compare_torch: bool = True,
           all_devices: bool = False) -> DoctorReport:
    """Examines the CUDA driver (``cuda_driver``: a library name or path), lists
    this process's devices and examines its own (torch.cuda.current_device()
    with ``compare_torch``), or every device with ``all_devices`` (a context
    on each: not while other ranks train on them); with ``compare_torch``,
    also what torch sees (which initialises CUDA in torch). Never raises for
    what it finds: the report's ``problem`` says what makes the device path
    unusable, with the fix."""
    if not isinstance(cuda_driver, str) or not cuda_driver:
        raise TypeError(f"cuda_driver must be a non-empty str, got {cuda_driver!r}")
    device = _torch_current_device() if compare_torch else -1
    raw = _core.doctor(cuda_driver, bool(all_devices), device)
    devices = [DoctorDevice(d["index"], d["uuid"], d["name"], d["memory_bytes"], d["pci_bus_id"],
                            tuple(d["compute_capability"]), d["kernel_loads"], d["kernel_note"],
                            d["examined"])
               for d in raw["devices"]]
    torch_view, torch_problem = _torch_view(devices) if compare_torch else (None, None)
    problem = raw["problem"]
    if problem is None and torch_problem is not None:
        problem = torch_problem
    return DoctorReport(
        rckpt_version=raw["rckpt_version"], cuda_built=raw["cuda_built"],
        kernel_image=raw["kernel_image"], driver_library=raw["driver_library"],
        driver_path=raw["driver_path"], driver_version=raw["driver_version"],
        cuda_visible_devices=raw["cuda_visible_devices"],
        cuda_device_order=raw["cuda_device_order"], devices=devices,
        no_device_reason=raw["no_device_reason"], problem=problem,
        memlock_soft=raw["memlock_soft"], memlock_hard=raw["memlock_hard"],
        pinned_probe_bytes=raw["pinned_probe_bytes"],
        pinned_probe_error=raw["pinned_probe_error"], host_memory_bytes=raw["host_memory_bytes"],
        host_memory_available=raw["host_memory_available"], torch=torch_view,
        device_pool=dict(raw["device_pool"]), current_device=raw["current_device"],
        all_devices=raw["all_devices"],
        kernel_min_driver_version=raw["kernel_min_driver_version"],
        kernel_min_driver_why=raw["kernel_min_driver_why"])


def main(argv: List[str]) -> int:
    """``python -m rckpt doctor [--all-devices] [--cuda-driver LIB]``: prints the report;
    exit 0 when usable, 6 otherwise, 2 for a usage error."""
    args = list(argv)
    driver = "libcuda.so.1"
    all_devices = False
    while args:
        if args[0] == "--all-devices":
            all_devices = True
            args = args[1:]
        elif args[0] == "--cuda-driver" and len(args) >= 2:
            driver = args[1]
            args = args[2:]
        else:
            print("usage: python -m rckpt doctor [--all-devices] [--cuda-driver LIB]",
                  file=sys.stderr)
            return 2
    report = doctor(cuda_driver=driver, all_devices=all_devices)
    print(report)
    return 0 if report.ok else 6
