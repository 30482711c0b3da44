"""Save options cross into the library as one value: rckpt._core.SaveOptions,
the library's SaveOptions, which every save front end builds (_args.save_options)
and every save binding takes whole. Its defaults and its checks are the
library's, so each option has one default and one message everywhere."""

import inspect
import os
import re

import pytest
import torch

import rckpt
import rckpt.hf
from rckpt import _core
from rckpt._args import SAVE_OPTIONS

SOURCE = os.environ.get("RCKPT_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))


def _front_ends():
    import rckpt.distributed
    from rckpt.async_save import AsyncSaver
    return [rckpt.save, rckpt.save_async, AsyncSaver.save, rckpt.convert, rckpt.hf.pack,
            rckpt.distributed.save]


@pytest.mark.parametrize("front_end", _front_ends(), ids=lambda f: f.__qualname__)
def test_every_front_ends_defaults_are_the_librarys(front_end):
    library = _core.SaveOptions()
    params = inspect.signature(front_end).parameters
    named = [name for name in SAVE_OPTIONS if name in params]
    assert {"codec", "level", "chunk_bytes"} <= set(named)
    for name in named:
        assert params[name].default == getattr(library, name), name


@pytest.mark.parametrize("options", [{"codec": "lz4"}, {"chunk_bytes": 0},
                                     {"chunk_bytes": 1 << 31}, {"chunk_bytes": -1},
                                     {"codec": "zstd", "level": 23}])
def test_one_message_per_option_whichever_front_end_is_given_it(tmp_path, options):
    state = {"model": {"w": torch.ones(2)}}
    calls = {
        "save": lambda: rckpt.save(tmp_path / "a.rckpt", state, **options),
        "save_async": lambda: rckpt.save_async(tmp_path / "b.rckpt", state, **options).result(),
        "convert": lambda: rckpt.convert(tmp_path / "absent.pt", tmp_path / "c.rckpt", **options),
        "hf.pack": lambda: rckpt.hf.pack(tmp_path, tmp_path / "d.rckpt", **options),
    }
    said = {}
    for who, call in calls.items():
        with pytest.raises(rckpt.InvalidArgumentError) as e:
            call()
        said[who] = str(e.value)
    assert len(set(said.values())) == 1, said
    assert not any(p.name.endswith(".rckpt") for p in tmp_path.iterdir())


def _naming(name, folders=("python/src", "include/rckpt")):
    where = []
    for folder in folders:
        for file in sorted(os.listdir(os.path.join(SOURCE, folder))):
            with open(os.path.join(SOURCE, folder, file), encoding="utf-8") as f:
                if re.search(rf"(?<![-\w]){name}\b", f.read()):
                    where.append(f"{folder}/{file}")
    return where


def test_a_new_save_option_is_named_in_three_places_below_the_signatures():
    # Between a front end's signature and the engine, a save option is named
    # in three places: the library's struct (include/rckpt/options.h), its
    # binding (python/src/options_binding.cc) and the Python layer's table
    # (SAVE_OPTIONS). No other binding names it: they take the value whole.
    assert "chunk_bytes" in SAVE_OPTIONS
    assert _naming("chunk_bytes") == ["python/src/options_binding.cc", "include/rckpt/options.h"]
    save_bindings = {"python/src/" + f for f in (
        "module.cc", "async_module.cc", "distributed_module.cc", "folder_binding.cc",
        "folder_binding.h", "other_formats.cc", "call_args.cc", "call_args.h")}
    for name in ("codec", "level", "shuffle", "chunk_bytes"):
        assert name in SAVE_OPTIONS
        for file in sorted(save_bindings):
            with open(os.path.join(SOURCE, file), encoding="utf-8") as f:
                text = f.read()
            # as a binding's argument, a parameter or a field set one by one
            plumbing = rf'"{name}"_a|(int|uint64_t|string&)\s+{name}\b|\.{name}\s*='
            assert not re.search(plumbing, text), (file, name)
