"""Real CUDA tensors through rckpt's CUDA runtime and torch's allocator and
streams. Marked gpu: the GPU proof (tests/gpu/proof.sh) runs these with
RCKPT_REQUIRE_GPU=1, where a missing GPU fails instead of skipping; elsewhere
they skip with the reason."""

import collections
import os
import subprocess
import sys

import pytest
import torch

import rckpt
from conftest import raw_bytes

_REQUIRE = os.environ.get("RCKPT_REQUIRE_GPU") == "1"


def _why_not():
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    report = rckpt.doctor()
    if not report.devices:
        return f"rckpt sees no CUDA device ({report.no_device_reason})"
    if not report.ok:
        return f"rckpt cannot use the GPU: {report.problem}"
    return None


_WHY_NOT = _why_not()
if _WHY_NOT and _REQUIRE:
    raise RuntimeError(f"the GPU proof needs a GPU: {_WHY_NOT}")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_WHY_NOT is not None, reason=str(_WHY_NOT))]

CUDA = torch.device("cuda", 0)


def cuda_state():
    torch.manual_seed(0)
    base = torch.randn(64, 48, device=CUDA)
    z = torch.randn(32, dtype=torch.complex64, device=CUDA)
    return {"model": {"w": torch.randn(1024, 1024, device=CUDA),
                      "h": torch.randn(333, device=CUDA).half(),
                      "b": torch.arange(10, device=CUDA) % 2 == 0,
                      "t": base.t(),                 # non-contiguous
                      "view": base[3:40:2, 5:],      # a strided view into another tensor
                      "conj": z.conj(),              # a lazy conjugate
                      "neg": z.conj().imag,          # a negative view
                      # inside an OrderedDict (what state_dict() returns), a list and a tuple
                      "nested": collections.OrderedDict(x=[(torch.full((7,), 2.0, device=CUDA),)])},
            "controller": {"step": 3}}


def logical(t):
    return t.resolve_conj().resolve_neg().contiguous().cpu()


def walk(prefix, obj):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(f"{prefix}.{k}", v)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_cuda_tensors_round_trip_onto_their_device(tmp, codec):
    state = cuda_state()
    rckpt.save(tmp / "g.rckpt", state, codec=codec)
    ck = rckpt.load(tmp / "g.rckpt")
    for name, v in walk("model", state["model"]):
        got = ck["model"]
        for part in name.split(".")[1:]:
            got = got[part]
        assert got.device == CUDA, name
        assert ck.origin[name] == "cuda:0"
        assert torch.equal(raw_bytes(got.cpu()), raw_bytes(logical(v))), name
    nested = ck["model"]["nested"]["x"][0][0]
    assert nested.device == CUDA and torch.equal(nested.cpu(), torch.full((7,), 2.0))
    host = rckpt.load(tmp / "g.rckpt", map_location="cpu")
    assert host["model"]["w"].device.type == "cpu"
    assert torch.equal(host["model"]["w"], state["model"]["w"].cpu())


def test_loaded_cuda_tensors_are_torchs_own_memory(tmp):
    w = torch.randn(4096, 1024, device=CUDA)
    rckpt.save(tmp / "m.rckpt", {"model": {"w": w}})
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(CUDA)
    ck = rckpt.load(tmp / "m.rckpt")
    after = torch.cuda.memory_allocated(CUDA)
    assert after - before >= w.numel() * 4, "the loaded tensor is counted by torch's allocator"
    got = ck["model"]["w"]
    assert torch.equal(got, w)
    del ck, got
    assert torch.cuda.memory_allocated(CUDA) == before, "freeing it gives the memory back to torch"


def test_a_load_is_ordered_with_torchs_stream_not_the_whole_device(tmp):
    w = torch.randn(2048, 2048, device=CUDA)
    rckpt.save(tmp / "o.rckpt", {"model": {"w": w}})
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        ck = rckpt.load(tmp / "o.rckpt")   # torch's current stream is `side`
        doubled = ck["model"]["w"] * 2      # runs on `side`, right after the load
    side.synchronize()
    assert torch.equal(doubled, w * 2)


@pytest.mark.parametrize("placement", [
    {},                                            # as stored
    {"model_device": "auto"},
    {"model_device": "cuda:0"},
    {"map_location": "cuda:0"},
    {"map_location": {"cuda:3": "cuda:0"}},
    {"map_location": lambda info: "cuda:0"},
])
def test_every_placement_form_onto_cuda(tmp, placement):
    state = {"model": {"w": torch.randn(100, device=CUDA)}, "metrics": {"m": torch.ones(3)}}
    rckpt.save(tmp / "p.rckpt", state, origin=None)
    if "map_location" in placement and isinstance(placement["map_location"], dict):
        # A file saved on a GPU this machine lacks, mapped back by its tag.
        rckpt.convert(tmp / "p.rckpt", tmp / "p3.rckpt", set_device={"cuda:0": "cuda:3"})
        path = tmp / "p3.rckpt"
    else:
        path = tmp / "p.rckpt"
    ck = rckpt.load(path, **placement)
    assert ck["model"]["w"].device == CUDA
    assert torch.equal(ck["model"]["w"], state["model"]["w"])
    assert ck["metrics"]["m"].device.type == "cpu"


def test_auto_is_the_current_device_and_the_current_device_is_kept(tmp):
    last = torch.cuda.device_count() - 1
    rckpt.save(tmp / "a.rckpt", {"model": {"w": torch.randn(10)}})
    torch.cuda.set_device(last)
    try:
        ck = rckpt.load(tmp / "a.rckpt", model_device="auto")
        assert ck.placement["model.w"] == f"cuda:{last}"
        assert torch.cuda.current_device() == last, "rckpt left torch's current device alone"
        rckpt.save(tmp / "b.rckpt", {"model": {"w": torch.randn(10, device="cuda:0")}})
        assert torch.cuda.current_device() == last
    finally:
        torch.cuda.set_device(0)


def test_load_into_cuda_tensors_waits_for_torchs_pending_reads(tmp):
    state = {"model": {"w": torch.randn(2048, 2048, device=CUDA)}}
    rckpt.save(tmp / "i.rckpt", state)
    into = {"w": torch.zeros(2048, 2048, device=CUDA)}
    reader_out = torch.empty_like(into["w"])
    reader_out.copy_(into["w"])             # queued on torch's stream, reads the target
    rckpt.load_into(tmp / "i.rckpt", {"model": into})
    assert torch.equal(into["w"], state["model"]["w"])
    assert torch.count_nonzero(reader_out) == 0, "the pending read saw the old values"


def test_save_reads_tensors_after_the_work_that_made_them(tmp):
    x = torch.randn(4096, 4096, device=CUDA)
    y = x @ x                                # queued; a save must wait for it
    rckpt.save(tmp / "s.rckpt", {"model": {"y": y, "yt": y.t()}})
    expected = y.cpu()
    back = rckpt.load(tmp / "s.rckpt", map_location="cpu")
    assert torch.equal(back["model"]["y"], expected)
    assert torch.equal(back["model"]["yt"], expected.t().contiguous())


def test_save_async_of_a_cuda_state_mutated_right_after_the_call(tmp):
    model = torch.nn.Linear(2048, 2048).to(CUDA)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(64, 2048, device=CUDA)).sum().backward()
    opt.step()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    expected = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    fut = rckpt.save_async(tmp / "a.rckpt", state)
    with torch.no_grad():                    # the next step, queued at once
        for p in model.parameters():
            p.add_(1.0)
    fut.result()
    back = rckpt.load(tmp / "a.rckpt", map_location="cpu")
    for k, v in expected.items():
        assert torch.equal(back["model"][k], v), k


def test_cuda_rng_generators_restore_to_the_host(tmp):
    torch.cuda.manual_seed_all(5)
    rng = rckpt.capture_rng()
    expected = torch.rand(4, device=CUDA)
    rckpt.save(tmp / "r.rckpt", {"controller": {}}, rng=rng)
    ck = rckpt.load(tmp / "r.rckpt", model_device="auto")
    assert all(t.device.type == "cpu" for t in ck.rng.values() if isinstance(t, torch.Tensor))
    report = rckpt.restore_rng(ck.rng)
    assert "torch.cuda.0" in report.restored
    assert torch.equal(torch.rand(4, device=CUDA), expected)


def test_a_cpu_only_load_leaves_cuda_usable_in_a_forked_child(tmp):
    code = (
        "import os, sys, torch, rckpt\n"
        "rckpt.save(sys.argv[1], {'model': {'w': torch.ones(3)}})\n"
        "ck = rckpt.load(sys.argv[1])\n"
        "assert not torch.cuda.is_initialized()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = torch.equal(rckpt.load(sys.argv[1], map_location='cuda:0')['model']['w'].cpu(),\n"
        "                     torch.ones(3))\n"
        "    os._exit(0 if ok else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp / "f.rckpt")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_doctor_agrees_with_torch_by_uuid():
    report = rckpt.doctor()
    assert report.ok, report.problem
    assert report.torch is not None and report.torch.matches, report.torch
    assert len(report.devices) == torch.cuda.device_count()
    assert "OK:" in str(report)


def test_dcp_writer_and_reader_with_cuda_tensors(tmp):
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    import rckpt.dcp
    state = {"w": torch.randn(256, 256, device=CUDA), "b": torch.randn(256, device=CUDA)}
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "d.rckpt"))
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(into, storage_reader=rckpt.dcp.Reader(tmp / "d.rckpt"))
    for k in state:
        assert into[k].device == CUDA
        assert torch.equal(into[k], state[k]), k


def test_a_nccl_process_group_saves_and_loads_cuda_shards(tmp):
    # One rank of NCCL (one GPU): the collectives' bytes travel as CUDA tensors.
    code = (
        "import sys, torch, torch.distributed as dist\n"
        "import rckpt.distributed as rd\n"
        "torch.cuda.set_device(0)\n"
        "dist.init_process_group('nccl', init_method='file://' + sys.argv[1] + '/store',\n"
        "                        rank=0, world_size=1)\n"
        "w = torch.arange(12., device='cuda').reshape(3, 4)\n"
        "rd.save(None, sys.argv[1] + '/n.rckpt', {'model': {'w': rd.Shard(w, (0, 0), (3, 4))}})\n"
        "back = rd.load(None, sys.argv[1] + '/n.rckpt', {'model.w': None}, map_location='cuda:0')\n"
        "assert back.blocks['model.w'].device.type == 'cuda'\n"
        "assert torch.equal(back.blocks['model.w'], w)\n"
        "dist.destroy_process_group()\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
