"""Slurm's units, read once for the whole adapter (slurm/units.py)."""

from __future__ import annotations

import pytest

from synergy_slurm.slurm.parse import accounting_state
from synergy_slurm.slurm.units import duration_s, size_mb, tres_items


@pytest.mark.parametrize("text, mb", [("4G", 4096), ("500000M", 500000), ("512", 512),
                                      ("1.50G", 1536), ("2048K", 2), ("1T", 1024 ** 2),
                                      ("4g", 4096), (" 7M ", 7)])
def test_sizes_with_a_bare_number_in_mb(text, mb):
    assert size_mb(text) == pytest.approx(mb)


def test_usage_records_count_a_bare_number_in_bytes():
    assert size_mb("1048576", bare="B") == pytest.approx(1.0)
    assert size_mb("3012K", bare="B") == pytest.approx(3012 / 1024)    # a suffix still rules
    assert size_mb("0", bare="B") == 0


@pytest.mark.parametrize("bad", ["", "12Q", "lots", "-4G", "4 G", "G"])
def test_what_is_not_a_size_is_an_error_naming_it(bad):
    with pytest.raises(ValueError, match="is not a memory size"):
        size_mb(bad)


@pytest.mark.parametrize("text, seconds", [("00:00:05", 5), ("01:02:03", 3723),
                                           ("2-00:00:01", 172801), ("03:04.500", 184.5),
                                           ("0", 0), ("1-02:03:04", 93784)])
def test_durations(text, seconds):
    assert duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "soon", "x-00:00:01", "1:2:3:4", "00:-1:00"])
def test_what_is_not_a_duration_is_an_error(bad):
    with pytest.raises(ValueError, match="is not a duration"):
        duration_s(bad)


def test_tres_lists():
    assert tres_items("cpu=6, mem=4G ,gres/gpu=2") == {"cpu": "6", "mem": "4G",
                                                      "gres/gpu": "2"}
    assert tres_items("cpu=6,junk,,mem=1G") == {"cpu": "6", "mem": "1G"}
    assert tres_items("") == {}
    with pytest.raises(ValueError, match="has no '='"):
        tres_items("cpu=6,junk", strict=True)


@pytest.mark.parametrize("value, state", [("CANCELLED by 0", "CANCELLED"),
                                          ("COMPLETED", "COMPLETED"),
                                          ("running,RESIZING", "RUNNING"), ("", ""),
                                          (["COMPLETED"], "COMPLETED"),
                                          (["PENDING", "REQUEUED"], "REQUEUED"), ([], "")])
def test_an_accounting_record_has_one_state_whatever_the_release(value, state):
    assert accounting_state(value) == state
