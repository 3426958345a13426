"""accmt.utils: set_seed and the helpers accmt 1.x's own tests used, as those tests used
them."""

from __future__ import annotations

import gc
import math
import random
import weakref

import torch

from accmt.utils import (
    clear_device_cache,
    combine_dicts,
    divide_into_batches,
    divide_list,
    drop_duplicates,
    filter_kwargs,
    get_array_partition,
    get_number_and_unit,
    get_seed,
    is_url,
    iterbatch,
    pad,
    set_seed,
)


def test_combine_dicts() -> None:
    assert combine_dicts({"a": 1}, {"b": 2}, {"a": 3}) == {"a": 3, "b": 2}


class _Node:
    """An object that refers to itself: only the cyclic garbage collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_clear_device_cache() -> None:
    # garbage_collection=True runs the cyclic collector, and only then: with the automatic one
    # held, a dropped cycle outlives the plain call and not the collecting one.
    automatic = gc.isenabled()
    gc.disable()
    try:
        node = _Node()
        alive = weakref.ref(node)
        del node
        clear_device_cache()
        assert alive() is not None
        clear_device_cache(garbage_collection=True)
        assert alive() is None
    finally:
        if automatic:
            gc.enable()
    if torch.cuda.is_available():  # the accelerator's cache is emptied: freed blocks go back
        torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")  # allocated, then freed
        cached = torch.cuda.memory_reserved()
        assert cached >= 64 * 2**20
        clear_device_cache()
        assert torch.cuda.memory_reserved() <= cached - 64 * 2**20


def test_divide_into_batches_and_iterbatch() -> None:
    items = list(range(57))
    batches = divide_into_batches(items, 6)
    assert len(batches) == math.ceil(57 / 6)
    assert batches[-1] == [54, 55, 56]
    assert list(iterbatch(items, 6)) == batches


def test_divide_list_and_get_array_partition_cut_alike() -> None:
    items = list(range(57))
    parts = divide_list(items, 6)
    assert [len(part) for part in parts] == [10, 10, 10, 9, 9, 9]
    assert [x for part in parts for x in part] == items
    assert [get_array_partition(items, 6, i) for i in range(6)] == parts
    assert torch.equal(get_array_partition(torch.arange(10), 5, 3), torch.tensor([6, 7]))


def test_drop_duplicates() -> None:
    tensor = torch.arange(10)
    mask = torch.tensor([i % 2 == 0 for i in range(10)])
    assert torch.equal(drop_duplicates(tensor, mask), torch.tensor([0, 2, 4, 6, 8]))
    assert drop_duplicates(tensor) is tensor


def test_pad() -> None:
    assert pad(torch.tensor([[1, 2]]), 4, 0).tolist() == [[1, 2, 0, 0]]
    assert pad(torch.tensor([1, 2, 3]), 2, 0).tolist() == [1, 2, 3]


def test_filter_kwargs() -> None:
    def fn(a: int, b: int, c: int, *args: int, **kwargs: int) -> int:
        return a + b + c

    kwargs = {"a": 1, "b": 2, "c": 3, "d": 4, "kwargs": 5}
    assert filter_kwargs(kwargs, fn) == {"a": 1, "b": 2, "c": 3}
    assert filter_kwargs({"in_features": 2, "bias": False, "x": 1}, torch.nn.Linear) == {
        "in_features": 2,
        "bias": False,
    }


def test_is_url() -> None:
    assert is_url("https://www.google.com")
    assert is_url("http://10.0.0.2:5000/mlflow")
    assert is_url("localhost")
    assert not is_url("not a url/")
    assert not is_url("logs/run1")


def test_get_number_and_unit() -> None:
    assert get_number_and_unit("1000") == (1000, None)
    assert get_number_and_unit("1000B") == (1000, "B")
    assert get_number_and_unit("2ep") == (2, "epoch")
    assert get_number_and_unit("500 steps") == (500, "step")
    assert get_number_and_unit("eval") == (1, "eval")


def test_seed() -> None:
    assert get_seed() is None
    assert get_seed(7) == 7
    set_seed(123)
    assert get_seed() == 123
    first = (random.random(), torch.rand(2).tolist())
    set_seed(123)
    assert (random.random(), torch.rand(2).tolist()) == first


def test_set_seed_is_at_the_top_as_in_1x() -> None:
    import accmt

    assert accmt.set_seed is set_seed  # so get_seed() knows the seed it was given
    assert "set_seed" in accmt.__all__
