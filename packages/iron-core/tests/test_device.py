"""Device descriptions and the per-context device binding (iron.core.device)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

from iron.core import device as device_module
from iron.core import plugins
from iron.core.device import (
    DEVICES,
    ENV_VAR,
    NPU1,
    NPU2,
    Device,
    NoDeviceError,
    as_device,
    get_current_device,
    require_device,
    set_current_device,
    use_device,
)


@pytest.fixture(autouse=True)
def _unbound(monkeypatch: pytest.MonkeyPatch):
    """Each test starts with no binding and no IRON_DEVICE, and leaves none."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    set_current_device(None)
    yield
    set_current_device(None)


# -- facts -------------------------------------------------------------------


def test_architecture_table_facts():
    for dev in (NPU1, NPU2):
        assert dev.core_rows == 4
        assert dev.core_memory_bytes == 64 * 1024
        # mlir-aie's allocator banks (AIE2TargetModel::getNumBanks), issue 28
        assert dev.core_memory_banks == 4
        assert dev.core_memory_bank_bytes == 16 * 1024
        assert dev.mem_tile_bytes == 512 * 1024
        assert (dev.shim_bds, dev.core_bds, dev.mem_tile_bds) == (16, 16, 48)
        assert (dev.dma_size_bits, dev.dma_stride_bits) == (10, 20)
        assert dev.dma_granule_bytes == 4
        assert dev.dma_iteration_max == 64
        assert dev.dma_repeat_max == 255
        assert dev.dma_alignment_bytes == 4
        assert dev.scratchpad_words == 32
        assert dev.dispatch_seconds == pytest.approx(160e-6)
    assert (NPU1.name, NPU1.arch, NPU1.columns) == ("npu1", "aie2", 4)
    assert (NPU2.name, NPU2.arch, NPU2.columns) == ("npu2", "aie2p", 8)
    assert (NPU1.full_elf, NPU1.bfp16) == (False, False)
    assert (NPU2.full_elf, NPU2.bfp16) == (True, True)


def test_compute_tiles():
    assert NPU1.compute_tiles == 16
    assert NPU2.compute_tiles == 32


def test_cost_model_figures_are_the_derived_ones():
    assert NPU1.peak_bf16_macs_per_s == pytest.approx(2.048e12)
    assert NPU2.peak_bf16_macs_per_s == pytest.approx(1.2288e13)
    assert NPU1.ddr_bytes_per_s == pytest.approx(102.4e9)
    assert NPU2.ddr_bytes_per_s == pytest.approx(120e9)
    for dev in (NPU1, NPU2):
        assert isinstance(dev.peak_bf16_macs_per_s, float)
        assert isinstance(dev.ddr_bytes_per_s, float)


def test_every_field_is_set_with_its_type():
    hints = {"str": str, "int": int, "bool": bool, "float": float}
    for dev in (NPU1, NPU2):
        for field in dataclasses.fields(Device):
            value = getattr(dev, field.name)
            assert type(value) is hints[field.type], (dev.name, field.name)


def test_device_is_frozen_and_str_is_its_name():
    with pytest.raises(dataclasses.FrozenInstanceError):
        NPU2.columns = 4  # type: ignore[misc]
    assert str(NPU1) == "npu1"
    assert str(NPU2) == "npu2"
    assert f"{NPU2}" == "npu2"


def test_devices_table():
    assert DEVICES == {"npu1": NPU1, "npu2": NPU2}
    for name, dev in DEVICES.items():
        assert dev.name == name


# -- names -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["npu2", "NPU2", "Npu2", " npu2 "])
def test_as_device_names_are_case_insensitive(name):
    assert as_device(name) is NPU2


def test_as_device_passes_devices_through():
    assert as_device(NPU1) is NPU1


@pytest.mark.parametrize("name", ["npu3", "", "phoenix", "npu"])
def test_as_device_unknown_name_names_value_and_known_names(name):
    with pytest.raises(ValueError) as info:
        as_device(name)
    message = str(info.value)
    assert repr(name) in message
    assert "npu1" in message and "npu2" in message


def test_as_device_wrong_type():
    with pytest.raises(TypeError, match="int"):
        as_device(2)  # type: ignore[arg-type]


# -- binding -----------------------------------------------------------------


def test_nothing_bound_by_default():
    assert get_current_device() is None


def test_set_and_clear():
    set_current_device("NPU1")
    assert get_current_device() is NPU1
    set_current_device(NPU2)
    assert get_current_device() is NPU2
    set_current_device(None)
    assert get_current_device() is None


def test_set_unknown_name_changes_nothing():
    set_current_device("npu1")
    with pytest.raises(ValueError, match="npu9"):
        set_current_device("npu9")
    assert get_current_device() is NPU1


def test_env_var_used_when_nothing_bound(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "NPU2")
    assert get_current_device() is NPU2
    assert require_device() is NPU2


def test_binding_wins_over_env_var(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "npu2")
    set_current_device("npu1")
    assert get_current_device() is NPU1
    with use_device("npu1"):
        assert get_current_device() is NPU1
    set_current_device(None)
    assert get_current_device() is NPU2


def test_env_var_read_on_every_call(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "npu1")
    assert get_current_device() is NPU1
    monkeypatch.setenv(ENV_VAR, "npu2")
    assert get_current_device() is NPU2


def test_empty_env_var_counts_as_unset(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "  ")
    assert get_current_device() is None


def test_bad_env_var_names_the_variable_and_the_value(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "npu7")
    with pytest.raises(ValueError) as info:
        get_current_device()
    message = str(info.value)
    assert "IRON_DEVICE" in message
    assert "npu7" in message
    assert "npu1" in message and "npu2" in message
    with pytest.raises(ValueError, match="IRON_DEVICE"):
        require_device()


def test_bad_env_var_is_ignored_while_a_device_is_bound(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "npu7")
    with use_device("npu2"):
        assert get_current_device() is NPU2


def test_binding_is_not_seen_by_a_new_thread():
    set_current_device("npu2")
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(get_current_device()))
    worker.start()
    worker.join()
    assert seen == [None]
    assert get_current_device() is NPU2


def test_binding_in_a_thread_does_not_leak_to_the_main_thread():
    seen: list[object] = []

    def bind_and_read():
        set_current_device("npu1")
        seen.append(get_current_device())

    worker = threading.Thread(target=bind_and_read)
    worker.start()
    worker.join()
    assert seen == [NPU1]
    assert get_current_device() is None


def test_threads_bind_independently():
    barrier = threading.Barrier(2)
    seen: dict[str, object] = {}

    def run(name):
        with use_device(name):
            barrier.wait()  # both threads are bound at the same time
            seen[name] = get_current_device()

    workers = [threading.Thread(target=run, args=(n,)) for n in ("npu1", "npu2")]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == {"npu1": NPU1, "npu2": NPU2}


def test_asyncio_tasks_bind_independently():
    async def bound(name):
        with use_device(name):
            await asyncio.sleep(0)
            return get_current_device()

    async def main():
        return await asyncio.gather(bound("npu1"), bound("npu2"))

    assert asyncio.run(main()) == [NPU1, NPU2]
    assert get_current_device() is None


def test_use_device_binds_and_restores():
    set_current_device("npu1")
    with use_device("Npu2") as dev:
        assert dev is NPU2
        assert get_current_device() is NPU2
        with use_device(NPU1):
            assert get_current_device() is NPU1
        assert get_current_device() is NPU2
    assert get_current_device() is NPU1


def test_use_device_restores_an_unbound_state():
    with use_device("npu2"):
        assert get_current_device() is NPU2
    assert get_current_device() is None


def test_use_device_restores_on_exception():
    set_current_device("npu1")
    with pytest.raises(KeyError), use_device("npu2"):
        assert get_current_device() is NPU2
        raise KeyError("boom")
    assert get_current_device() is NPU1


def test_use_device_none_unbinds_for_the_block(monkeypatch):
    set_current_device("npu2")
    with use_device(None) as dev:
        assert dev is None
        assert get_current_device() is None
        monkeypatch.setenv(ENV_VAR, "npu1")
        assert get_current_device() is NPU1
    assert get_current_device() is NPU2


def test_use_device_unknown_name_binds_nothing():
    with pytest.raises(ValueError, match="npu5"), use_device("npu5"):
        pass  # pragma: no cover
    assert get_current_device() is None


# -- require_device ----------------------------------------------------------


def test_require_device_prefers_the_argument(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "npu1")
    set_current_device("npu1")
    assert require_device("NPU2") is NPU2
    assert require_device(NPU2) is NPU2


def test_require_device_returns_the_current_one():
    with use_device("npu1"):
        assert require_device() is NPU1


def test_require_device_unknown_argument():
    with pytest.raises(ValueError, match="npu0"):
        require_device("npu0")


def test_require_device_defaults_as_the_cli_does(emulated_default, caplog):
    # The runtime's default (the NPU present, else npu2): the function
    # iron-lm's --device default calls too.
    with use_device(None), caplog.at_level("WARNING", logger="iron"):
        assert require_device() is NPU2
        assert require_device() is NPU2
    notices = [r.getMessage() for r in caplog.records if r.name == "iron"]
    assert len(notices) == 1, notices  # said once
    assert "no device named: using npu2" in notices[0]
    assert "emulated" in notices[0] and "iron.use_device" in notices[0]


def test_require_device_default_follows_the_detected_npu(monkeypatch):
    class Detected:  # a runtime whose XRT reports an NPU1
        def default_device(self):
            return "npu1"

    monkeypatch.setattr(plugins, "backend", Detected)
    monkeypatch.setattr(device_module, "_announced", set())
    assert require_device() is NPU1


def test_require_device_message_names_all_three_ways(no_runtime):
    with pytest.raises(NoDeviceError) as info:
        require_device()
    message = str(info.value)
    assert 'iron.set_current_device("npu2")' in message
    assert 'with iron.use_device("npu2"):' in message
    assert "IRON_DEVICE=npu2" in message
    assert "iron-runtime" in message


def test_no_device_error_is_a_runtime_error(no_runtime):
    assert issubclass(NoDeviceError, RuntimeError)
    with pytest.raises(RuntimeError):
        require_device()


def test_public_names_have_docstrings():
    for name in device_module.__all__:
        value = getattr(device_module, name)
        if isinstance(value, (Device, dict, str)):
            continue  # constants are documented by their #: comments
        assert value.__doc__, name
    assert device_module.__doc__
