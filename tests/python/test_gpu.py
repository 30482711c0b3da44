"""Real CUDA tensors through the library's CUDA runtime (pinned ring, device
copies). Marked gpu: tests/gpu/run.sh runs them; they skip without a CUDA
build of torch, a GPU, or an rckpt built with the CUDA toolkit."""

import pytest
import torch

import rckpt
from conftest import raw_bytes

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
    pytest.mark.skipif(rckpt.cuda_device_count() == 0,
                       reason="rckpt's runtime sees no CUDA device (built without the toolkit?)"),
]


def cuda_state():
    torch.manual_seed(0)
    return {"model": {"w": torch.randn(1024, 1024, device="cuda:0"),
                      "h": torch.randn(333, device="cuda:0").half(),
                      "b": torch.arange(10, device="cuda:0") % 2 == 0,
                      "t": torch.randn(64, 32, device="cuda:0").t()},
            "controller": {"step": 3}}


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_cuda_tensors_round_trip_onto_their_device(tmp, codec):
    state = cuda_state()
    rckpt.save(tmp / "g.rckpt", state, codec=codec)
    ck = rckpt.load(tmp / "g.rckpt")
    for k, v in state["model"].items():
        got = ck["model"][k]
        assert got.device == torch.device("cuda:0"), k
        assert ck.origin[f"model.{k}"] == "cuda:0"
        assert torch.equal(raw_bytes(got), raw_bytes(v)), k  # byte for byte with the host path
    host = rckpt.load(tmp / "g.rckpt", map_location="cpu")
    for k, v in state["model"].items():
        assert torch.equal(raw_bytes(host["model"][k]), raw_bytes(v)), k


def test_load_into_cuda_and_model_device(tmp):
    state = cuda_state()
    rckpt.save(tmp / "g.rckpt", state)
    into = {k: torch.zeros_like(v.contiguous()) for k, v in state["model"].items()}
    rckpt.load_into(tmp / "g.rckpt", {"model": into})
    for k, v in state["model"].items():
        assert torch.equal(into[k], v.contiguous()), k
    ck = rckpt.load(tmp / "g.rckpt", model_device="auto")
    assert ck.placement["model.w"] == "cuda:0"
    assert ck["model"]["w"].is_cuda


def test_cuda_rng_generators_restore(tmp):
    torch.cuda.manual_seed_all(5)
    rng = rckpt.capture_rng()
    expected = torch.rand(4, device="cuda:0")
    rckpt.save(tmp / "r.rckpt", {"controller": {}}, rng=rng)
    ck = rckpt.load(tmp / "r.rckpt")
    report = rckpt.restore_rng(ck.rng)
    assert "torch.cuda.0" in report.restored
    assert torch.equal(torch.rand(4, device="cuda:0"), expected)


def test_a_nccl_process_group_saves_and_loads_cuda_shards(tmp):
    # One rank of NCCL (one GPU): the collectives' bytes travel as CUDA tensors.
    import subprocess
    import sys
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
