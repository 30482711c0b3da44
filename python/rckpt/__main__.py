"""``python -m rckpt doctor``: what rckpt sees of this machine's GPUs and whether
torch in this Python sees the same ones (rckpt.doctor()). The other commands
are the ``rckpt`` tool's (``rckpt --help``)."""

import sys

from .doctor import main as doctor_main


def main() -> int:
    if sys.argv[1:2] == ["doctor"]:
        return doctor_main(sys.argv[2:])
    print("usage: python -m rckpt doctor [--cuda-driver LIB]\n"
          "(the other commands are the rckpt tool's: rckpt --help)", file=sys.stderr)
    return 2


sys.exit(main())
