"""smallgemm.c's blocking (from how many rows the float32 products run blocked, their tallest tile) and
its choice per machine (eagle_core/cpu/kernels/ftuning.py): no blocking changes a bit of any output,
the measurement picks among the candidates and leaves the library as it found it, the choice is cached
and the environment can fix or skip it."""
import pytest
import torch

from eagle_core.cpu import kernels
from eagle_core.cpu.kernels import ftuning
from eagle_core.environment import SettingError

pytestmark = pytest.mark.skipif(not kernels.SmallGemm.available(), reason="no kernels library")

EXTREMES = [(2, 1), (13, 12), (4, 5), (13, 3), (2, 12)]


@pytest.fixture
def lib():
    lib = kernels.library()
    was = ftuning.current(lib)
    yield lib
    ftuning.set_blocking(lib, was)


@pytest.mark.parametrize("n,k", [(960, 576), (576, 1536), (100, 70), (33, 64)])
def test_no_blocking_changes_a_bit_of_any_row(lib, n, k):
    torch.manual_seed(0)
    st = kernels.SmallGemm.prepare(torch.randn(n, k) / k ** 0.5)
    x = torch.randn(20, k)
    ftuning.set_blocking(lib, ftuning.Blocking())
    ref = kernels.SmallGemm.run(st, x, None)
    for f, h in list(ftuning.CANDIDATES) + EXTREMES:
        ftuning.set_blocking(lib, ftuning.Blocking(f, h))
        for m in range(1, 21):
            assert torch.equal(kernels.SmallGemm.run(st, x[:m].contiguous(), None), ref[:m]), (f, h, m)


def test_a_blocking_out_of_range_is_refused_and_changes_nothing(lib):
    ftuning.set_blocking(lib, ftuning.Blocking(9, 8))
    for f, h in ((1, 6), (14, 6), (7, 0), (7, 13)):
        with pytest.raises(ValueError, match="out of range"):
            ftuning.set_blocking(lib, ftuning.Blocking(f, h))
    assert ftuning.current(lib) == ftuning.Blocking(9, 8)


def test_the_measurement_scores_every_candidate_and_restores_the_library(lib):
    ftuning.set_blocking(lib, ftuning.Blocking(4, 5))
    work = ftuning.workload(lib, shapes=((64, 64), (96, 128), (48, 64)))
    choice, scores = ftuning.measure(lib, 2, work=work, rounds=1)
    assert (choice.blocked_from, choice.height) in ftuning.CANDIDATES
    assert set(scores) == {ftuning.Blocking(f, h).text() for f, h in ftuning.CANDIDATES}
    assert min(scores.values()) >= sum(ftuning.ROWS.values()) - 1e-9  # 1.0 a unit of weight: the best everywhere
    assert ftuning.current(lib) == ftuning.Blocking(4, 5)


@pytest.fixture
def fresh(monkeypatch, tmp_path, lib):
    """No blocking applied yet in this process, the cache in tmp_path."""
    monkeypatch.setattr(ftuning, "_APPLIED", {})
    monkeypatch.setattr(ftuning, "cache_dir", lambda: str(tmp_path))
    monkeypatch.delenv("EAGLE_F32_TUNING", raising=False)
    return monkeypatch


def test_the_environment_fixes_or_skips_the_blocking(lib, fresh):
    fresh.setenv("EAGLE_F32_TUNING", "from=7, height=6")
    assert ftuning.ensure(lib, 2) == ftuning.Blocking(7, 6) == ftuning.current(lib)
    assert "EAGLE_F32_TUNING" in ftuning.describe(lib, 2)
    fresh.setattr(ftuning, "_APPLIED", {})
    fresh.setenv("EAGLE_F32_TUNING", "height=8")
    assert ftuning.ensure(lib, 2) == ftuning.Blocking(13, 8)
    fresh.setattr(ftuning, "_APPLIED", {})
    fresh.setenv("EAGLE_F32_TUNING", "off")
    assert ftuning.ensure(lib, 2) == ftuning.Blocking() == ftuning.current(lib)
    fresh.setattr(ftuning, "_APPLIED", {})
    for bad in ("from=1", "from=14", "height=0", "tile=4", "fast"):
        fresh.setenv("EAGLE_F32_TUNING", bad)
        with pytest.raises(SettingError, match="EAGLE_F32_TUNING"):
            ftuning.ensure(lib, 2)


def test_a_measured_choice_is_cached_per_cpu_and_read_back(lib, fresh):
    fresh.setattr(ftuning, "measure", lambda lib, threads: (ftuning.Blocking(9, 8), {"x": 7.0}))
    if not ftuning.applies(lib):
        assert ftuning.ensure(lib, 2) == ftuning.Blocking() and "no AVX-512" in ftuning.describe(lib, 2)
        return
    assert ftuning.ensure(lib, 2) == ftuning.Blocking(9, 8) and "measured" in ftuning.describe(lib, 2)
    fresh.setattr(ftuning, "_APPLIED", {})
    fresh.setattr(ftuning, "measure", lambda lib, threads: pytest.fail("measured again"))
    ftuning.set_blocking(lib, ftuning.Blocking())
    assert ftuning.ensure(lib, 2) == ftuning.Blocking(9, 8) == ftuning.current(lib)
    assert "cached" in ftuning.describe(lib, 2)
    with open(ftuning._cache_path(2), "w") as f:
        f.write('{"choice": {"blocked_from": 40, "height": 8}}')  # out of range: measured again
    fresh.setattr(ftuning, "_APPLIED", {})
    fresh.setattr(ftuning, "measure", lambda lib, threads: (ftuning.Blocking(7, 6), {}))
    assert ftuning.ensure(lib, 2) == ftuning.Blocking(7, 6)
