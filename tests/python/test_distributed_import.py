"""`import rckpt` needs no MPI; `import rckpt.distributed` says why it cannot
work where this rckpt was built without MPI or mpi4py is missing. Runs
without MPI too (test_distributed.py skips there)."""

import os
import shutil
import subprocess
import sys

import pytest

import rckpt

PACKAGE = os.path.dirname(rckpt.__file__)


def run(code, pythonpath):
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=pythonpath)


def test_without_the_mpi_extension_rckpt_works_and_distributed_says_why(tmp):
    # The package as a build without MPI lays it out: no rckpt._distributed.
    shutil.copytree(PACKAGE, tmp / "rckpt",
                    ignore=lambda d, names: [n for n in names if n.startswith("_distributed")])
    r = run("import rckpt, torch\n"
            "rckpt.save('ck.rckpt', {'model': {'w': torch.ones(2)}})\n"
            "assert torch.equal(rckpt.load('ck.rckpt')['model']['w'], torch.ones(2))\n"
            "try:\n"
            "    import rckpt.distributed\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n", tmp)
    assert r.returncode == 0, r.stderr
    assert "ImportError: rckpt.distributed is not available: this rckpt was built without MPI" \
        in r.stdout, r.stdout


def test_without_mpi4py_distributed_says_it_needs_mpi4py(tmp):
    if not any(n.startswith("_distributed") for n in os.listdir(PACKAGE)):
        pytest.skip("rckpt was built without MPI (no rckpt._distributed)")
    r = run("import sys\n"
            "sys.modules['mpi4py'] = None  # as if it were not installed\n"
            "try:\n"
            "    import rckpt.distributed\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n", os.path.dirname(PACKAGE))
    assert r.returncode == 0, r.stderr
    assert "ImportError: rckpt.distributed needs mpi4py" in r.stdout, r.stdout
