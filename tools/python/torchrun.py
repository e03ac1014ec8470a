#!/usr/bin/env python3
"""`torchrun` for Debian's python3-torch 1.13 on Python 3.11.

install.sh installs this file as .cache/venv/bin/torchrun (shebang set to the
venv's python). It is torch.distributed.run's own main() with one fix:

torch 1.13's Std.from_str finds the value by iterating the IntFlag `Std`, and
Python 3.11 no longer yields the zero member NONE nor the alias ALL (=3) when
iterating a flag, so the defaults `--redirects 0 --tee 0` parse to None and
torchrun dies with "AttributeError: 'NoneType' object has no attribute 'get'"
(fixed upstream in torch 2.0). We replace from_str with a lookup by value;
nothing in site-packages is changed. Plain `python -m torch.distributed.run`
works without this wrapper only with non-zero values for both options, e.g.
`--redirects 9:0 --tee 9:0` (a per-rank mapping for an unused local rank).
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api as _mp_api

_Std = _mp_api.Std


def _from_str(cls, vm):
    def to_std(v):
        return cls(int(v))

    if re.match(_mp_api._VALUE_REGEX, vm):
        return to_std(vm)
    if re.match(_mp_api._MAPPING_REGEX, vm):
        return {int(i): to_std(v) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{_mp_api._VALUE_REGEX}> or <{_mp_api._MAPPING_REGEX}>")


if _Std.from_str("0") is None:  # only patch where the bug is present
    _Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(main())
