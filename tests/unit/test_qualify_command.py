"""From one boot's evidence to the record: the glue the CPU integration cannot sample."""

import pytest

from launcher import pipeline
from launcher.errors import EXIT_USER_ERROR
from launcher.qualify.boot import Boot
from launcher.qualify.client import Outcome, WorkloadResult
from launcher.qualify.command import QualifyFailed, _record
from launcher.qualify.sampler import rank_records
from launcher.qualify.workload import worst_case
from launcher.units import GiB, MiB
from tests.conftest import MINIMAL
from tests.unit.test_qualify_sampler import write_record


@pytest.fixture
def planned(write, tmp_path):
    loaded = pipeline.load(str(write("p.yaml", MINIMAL)), (f"runtime.cache_root={tmp_path}",))
    return pipeline.make_plan(loaded, use_qualified=False)


def evidence(planned, tmp_path, blocks, low_water, sampled=True, driver=None):
    """A boot whose workers wrote their records (``blocks`` per rank) into ``tmp_path``,
    read back as ``boot`` reads them."""
    result = WorkloadResult([Outcome(i, True, 1.0, 8) for i in range(4)], seconds=4.0)
    for r, b in blocks.items():
        write_record(tmp_path, r, kv={"blocks": b, "tokens": 0, "planned_tokens": 0})
    unreadable = []
    records = rank_records(tmp_path, unreadable.append)
    return Boot(
        planned, tmp_path, result, records, low_water, sampled, 100, 0, {}, unreadable, driver
    )


def test_sampled_low_water_sets_the_size_and_the_tightest_rank_bounds_it(planned, tmp_path):
    kv = planned.plan.kv
    page, n = kv.layout.page_bytes, kv.blocks_per_rank
    margin = planned.loaded.profile.memory.safety_margin
    low = {0: margin + 3 * GiB, 1: margin + 1 * GiB, 2: margin + 2 * GiB, 3: margin + 5 * GiB}
    b = evidence(planned, tmp_path, {r: n for r in range(4)}, low)
    rec = _record(b, worst_case(planned.loaded.profile), margin)
    assert rec.kv.blocks == (n * page + 1 * GiB) // page
    assert rec.kv.bounding_rank == 1
    assert rec.kv.tokens == rec.kv.blocks * kv.layout.block_tokens * 4  # DCP 4
    assert rec.planned.blocks == n
    assert rec.ranks[1].headroom == 1 * GiB
    assert "NVML" in rec.basis


def test_without_sampling_the_size_is_what_the_workers_got(planned, tmp_path):
    n = planned.plan.kv.blocks_per_rank
    b = evidence(planned, tmp_path, {r: n for r in range(4)}, {}, sampled=False)
    rec = _record(b, worst_case(planned.loaded.profile), 512 * MiB)
    assert rec.kv.blocks == n
    assert rec.ranks[0].low_water_free is None


def test_a_rank_without_its_kv_record_is_an_error(planned, tmp_path):
    n = planned.plan.kv.blocks_per_rank
    b = evidence(planned, tmp_path, {0: n, 1: n, 2: n}, {}, sampled=False)
    with pytest.raises(QualifyFailed, match="4 rank"):
        _record(b, worst_case(planned.loaded.profile), 512 * MiB)


def test_too_little_room_for_one_request_is_an_error(planned, tmp_path):
    n = planned.plan.kv.blocks_per_rank
    page = planned.plan.kv.layout.page_bytes
    margin = 512 * MiB
    # The worst moment breached the margin by all but a few blocks of the KV cache.
    low = {r: margin - (n - 3) * page for r in range(4)}
    b = evidence(planned, tmp_path, {r: n for r in range(4)}, low)
    with pytest.raises(QualifyFailed, match="fewer than one max_model_len request"):
        _record(b, worst_case(planned.loaded.profile), margin)


def test_a_malformed_record_is_an_error_naming_it(planned, tmp_path):
    n = planned.plan.kv.blocks_per_rank
    (tmp_path / "measure-rank3.json").write_text('{"schema": "b12x-launch/measurement/1"}')
    b = evidence(planned, tmp_path, {0: n, 1: n, 2: n}, {}, sampled=False)
    with pytest.raises(QualifyFailed) as err:
        _record(b, worst_case(planned.loaded.profile), 512 * MiB)
    assert str(err.value).startswith(f"{tmp_path / 'measure-rank3.json'}: malformed measured")
    assert err.value.exit_code == EXIT_USER_ERROR  # as for a missing record


def test_the_record_carries_the_driver_of_the_run_file(planned, tmp_path, monkeypatch):
    from launcher.launch import hardware

    def no_query():
        raise AssertionError("qualify asked the GPUs for the driver again")

    monkeypatch.setattr(hardware, "query_gpus", no_query)
    n = planned.plan.kv.blocks_per_rank
    b = evidence(planned, tmp_path, {r: n for r in range(4)}, {}, sampled=False, driver="580.1")
    rec = _record(b, worst_case(planned.loaded.profile), 512 * MiB)
    assert rec.environment.driver == "580.1"


def test_a_boot_on_another_kind_of_card_stays_out_of_the_calibration_store(planned, tmp_path):
    """Under --force on other cards the qualified size is those cards' ceiling: written
    to the profile's store it would pin the next launch on the profile's own cards."""
    from launcher.plan.calibration import store_dir
    from launcher.plan.qualified import NAME, save_qualified

    n = planned.plan.kv.blocks_per_rank
    b = evidence(planned, tmp_path, {r: n for r in range(4)}, {}, sampled=False)
    b.gpu_kind = "rtx-5090"
    assert not b.on_profiles_cards()
    rec = _record(b, worst_case(planned.loaded.profile), 512 * MiB)
    assert rec.environment.gpu_kind == "rtx-5090"
    profile = planned.loaded.profile
    save_qualified(rec, tmp_path, profile, planned.fingerprint)
    assert (tmp_path / NAME).is_file()
    assert not (store_dir(profile, planned.fingerprint) / NAME).exists()
    b.gpu_kind = None  # a run file that did not say: the profile's own cards
    assert b.on_profiles_cards()
