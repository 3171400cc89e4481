"""Tests for ``python -m iron.lm.tune`` and the Llama application's shipped profiles.

On the tiny config (``LlamaConfig.tiny()`` written to a temporary
directory): a tune end to end, resuming after an interruption, ``--jobs 2``,
``--ops``, ``--check`` catching a stale entry and an unknown tunable, and a
call-site keyword beating the profile. On the Llama-3.2-1B config shipped
with the application: every entry of the shipped npu1/npu2 profiles matches
a step of its versions, ``Llama`` applies them by default, and applying
them moves tunables off ``resolve()``'s defaults (the cost model tells the
settings apart) to a version the model times faster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import iron
from iron.core.cost import step_time
from iron.core.profile import Profile
from iron.lm import tune
from iron.lm.applications import APPLICATIONS, application
from iron.lm.applications.llama import (
    DEFAULT_CONFIG,
    PROFILES,
    LlamaApplication,
    placeholder_state_dict,
)
from iron.lm.config import LlamaConfig
from iron.lm.model import Llama
from iron.operators.elementwise import AXPY
from iron.operators.matmul import GEMV
from iron.runtime import select

DEVICE = "npu2"


@pytest.fixture(autouse=True)
def _emulated(monkeypatch, tmp_path):
    """The emulated NPU, and a cache home that is never the user's."""
    monkeypatch.setenv("IRON_BACKEND", "emu")
    monkeypatch.setattr(select, "_chosen", None)
    monkeypatch.setenv("IRON_CACHE", str(tmp_path / "iron-cache"))


@pytest.fixture
def config_json(tmp_path) -> Path:
    """The tiny config written as a checkpoint directory's config.json."""
    directory = tmp_path / "tiny"
    directory.mkdir()
    LlamaConfig.tiny().to_json(directory / "config.json")
    return directory / "config.json"


def smallest(op: iron.Operator, dev: iron.Device) -> float:
    """A stand-in measure that prefers the smallest tiles and fewest columns.

    ``resolve()`` mostly picks the largest that fit, so a profile tuned by
    this one differs from the defaults: applying it visibly moves tunables.
    """
    values = [getattr(op, name) for name in type(op).declaration.tunables]
    return 1.0 + sum(v for v in values if isinstance(v, int)) * 1e-6


SMALLEST = tune.Measure("smallest", "test: smallest tunables", smallest)


def _tune(out: Path, **kwargs):
    kwargs.setdefault("cache", out.parent / f"{out.name}.jsonl")
    return tune.tune(
        LlamaApplication(),
        LlamaConfig.tiny(),
        DEVICE,
        out=out,
        progress=False,
        **kwargs,
    )


def _graph(config: LlamaConfig, profile, weights: str = "bf16") -> Llama:
    if weights != "bf16":  # the application's graph, with this profile
        graph = LlamaApplication(weights=weights).graph(config)
        graph.profile = profile
        return graph
    graph = Llama(config, context=2048, rows=16, profile=profile)
    graph.load_state_dict(placeholder_state_dict(config))
    return graph


def _versions(graph: Llama, dev: str) -> list:
    """The prompt and decode versions of ``graph`` recorded on ``dev``."""
    with iron.use_device(dev):
        return [graph.record(tokens=((graph.rows,), np.int32)), graph.record()]


def _steps(graph: Llama, dev: str) -> list:
    return [step.op for recording in _versions(graph, dev) for step in recording.steps]


def _tunables(op: iron.Operator) -> dict:
    return {name: getattr(op, name) for name in type(op).declaration.tunables}


# -- end to end ---------------------------------------------------------------------


def test_tune_command_writes_a_profile_of_every_shape(config_json, tmp_path, capsys):
    out = tmp_path / "profiles"
    argv = ["llama", "--checkpoint", str(config_json), "--device", DEVICE]
    argv += ["--out", str(out), "--cache", str(tmp_path / "c.jsonl"), "--no-progress"]
    assert tune.main(argv) == 0
    printed = capsys.readouterr().out
    assert "measured by cost model (emulated NPU)" in printed
    assert "not a measurement on an NPU" in printed

    path = out / f"{DEVICE}.json"
    profile = Profile.load(path)
    meta = profile.meta
    assert meta["measured_by"] == "cost model (emulated NPU)"
    assert meta["modelled"] is True
    assert (meta["device"], meta["application"]) == (DEVICE, "llama")
    assert meta["config"].startswith("tiny (sha256 ")
    assert meta["command"] == "python -m iron.lm.tune " + " ".join(argv)
    assert meta["settings"] > meta["refused"] > 0

    # One entry a line, sorted by operator name: a regenerated file diffs well.
    lines = path.read_text().splitlines()
    assert len(lines) == len(profile) + 3
    names = [json.loads(line.rstrip(","))["operator"] for line in lines[2:-1]]
    assert names == sorted(names)

    # Every entry matches a step of the versions, and every shape has one.
    problems, notes = tune.check_profiles(
        LlamaApplication(), LlamaConfig.tiny(), out, [DEVICE]
    )
    assert problems == [] and notes == []

    # Applied, each step takes its entry's tunables (none pinned by a call).
    applied = _steps(_graph(LlamaConfig.tiny(), out), DEVICE)
    for op in applied:
        given = profile.tunables_for(type(op), tune.call_dims(op))
        assert {k: getattr(op, k) for k in given} == given
        assert not op.pinned


def test_resume_after_an_interruption_measures_nothing_twice(tmp_path, monkeypatch):
    whole = _tune(tmp_path / "whole")
    real = tune._evaluate
    seen: list[tuple] = []

    def key(task: tuple) -> tuple:
        op, setting, _, _ = task
        return repr(op), tune._canon(setting)

    def stopping(task: tuple) -> dict:
        if len(seen) == 40:
            raise KeyboardInterrupt
        seen.append(key(task))
        return real(task)

    monkeypatch.setattr(tune.run, "_evaluate", stopping)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        _tune(out)
    assert not (out / f"{DEVICE}.json").exists()
    cache = tmp_path / "resumed.jsonl"
    assert len(cache.read_text().splitlines()) == 40
    first = list(seen)

    seen.clear()

    def counting(task: tuple) -> dict:
        seen.append(key(task))
        return real(task)

    monkeypatch.setattr(tune.run, "_evaluate", counting)
    report = _tune(out)
    assert report.cached == 40
    assert report.measured == whole.evaluations - 40 == len(seen)
    assert not set(first) & set(seen)
    assert len(set(seen)) == len(seen)
    assert (out / f"{DEVICE}.json").read_text() == (
        tmp_path / "whole" / f"{DEVICE}.json"
    ).read_text()
    # A third run reads everything back and measures nothing.
    seen.clear()
    assert _tune(out).measured == 0 and not seen


def test_the_command_reports_an_interruption_and_how_to_continue(
    config_json, tmp_path, monkeypatch, capsys
):
    def interrupted(task: tuple) -> dict:
        raise KeyboardInterrupt

    monkeypatch.setattr(tune.run, "_evaluate", interrupted)
    argv = ["llama", "--checkpoint", str(config_json.parent), "--device", DEVICE]
    argv += ["--out", str(tmp_path / "out"), "--no-progress"]
    assert tune.main(argv) == tune.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "rerun the same command to continue" in err
    assert str(tmp_path / "iron-cache" / "tune" / "llama.jsonl") in err


def test_jobs_2_gives_the_same_profile(tmp_path):
    one = _tune(tmp_path / "one")
    two = _tune(tmp_path / "two", jobs=2)
    assert two.measured == one.measured == one.evaluations
    assert (tmp_path / "two" / f"{DEVICE}.json").read_text() == (
        tmp_path / "one" / f"{DEVICE}.json"
    ).read_text()


def test_ops_retunes_only_those_operators_and_keeps_the_rest(tmp_path):
    out = tmp_path / "p"
    _tune(out)
    before = Profile.load(out / f"{DEVICE}.json")
    _tune(out, measure=SMALLEST, ops=["GEMV"], cache=tmp_path / "ops.jsonl")
    after = Profile.load(out / f"{DEVICE}.json")
    assert after.meta["ops"] == ["GEMV"]
    assert len(after) == len(before)
    kept = [e for e in before if e[0] is not GEMV]
    assert [e for e in after if e[0] is not GEMV] == kept
    gemvs = [(d, t) for c, d, t in after if c is GEMV]
    assert gemvs and gemvs != [(d, t) for c, d, t in before if c is GEMV]


def test_a_bf16_tune_keeps_the_packed_weights_entries(config_json, tmp_path, capsys):
    # QGEMV's entries (tuned with --weights q4) are not dropped by a later
    # whole rewrite that tunes bf16 only: it tunes no QGEMV.
    out = tmp_path / "profiles"
    argv = ["llama", "--checkpoint", str(config_json), "--device", DEVICE]
    argv += ["--out", str(out), "--cache", str(tmp_path / "c.jsonl"), "--no-progress"]
    assert tune.main([*argv, "--weights", "q4", "--ops", "QGEMV"]) == 0
    packed = [e for e in Profile.load(out / f"{DEVICE}.json")]
    assert packed and all(cls.__name__ == "QGEMV" for cls, _, _ in packed)
    capsys.readouterr()
    assert tune.main(argv) == 0
    assert (
        f"kept the entries of operators this run did not tune (QGEMV: {len(packed)})"
        in (capsys.readouterr().out)
    )
    after = Profile.load(out / f"{DEVICE}.json")
    assert [e for e in after if e[0].__name__ == "QGEMV"] == packed
    assert any(cls is GEMV for cls, _, _ in after)  # and the bf16 ones tuned
    # a stale entry of a tuned operator still goes: the rewrite replaces them
    stale = Profile.load(out / f"{DEVICE}.json")
    stale.add(GEMV, M=12345, K=64, tile_m=15)
    stale.save(out / f"{DEVICE}.json")
    assert tune.main(argv) == 0
    assert all(d.get("M") != 12345 for _, d, _ in Profile.load(out / f"{DEVICE}.json"))


def test_a_profile_that_does_not_load_is_refused_with_ops_and_rewritten_without(
    tmp_path, caplog
):
    out = tmp_path / "p"
    out.mkdir()
    (out / f"{DEVICE}.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(tune.TuneError, match=r"--ops GEMV keeps the other entries"):
        _tune(out, ops=["GEMV"])
    with caplog.at_level("WARNING", logger="iron.lm.tune"):
        report = _tune(out)
    assert "does not load" in caplog.text and "rewriting it whole" in caplog.text
    assert len(Profile.load(out / f"{DEVICE}.json")) == len(report.profile) > 0


def test_settings_are_capped_keeping_the_default(tmp_path):
    config = LlamaConfig.tiny()
    recordings = LlamaApplication().versions(config, DEVICE)
    full = tune.collect_shapes(recordings.values(), DEVICE)
    capped = tune.collect_shapes(recordings.values(), DEVICE, max_settings=12)
    assert [str(s) for s in full] == [str(s) for s in capped]
    for whole, cut in zip(full, capped):
        assert whole.default in cut.settings
        if whole.total > 12:
            assert cut.trimmed and len(cut.settings) < len(whole.settings)
        else:
            assert not cut.trimmed and cut.settings == whole.settings


# -- the check ------------------------------------------------------------------------


def test_check_catches_a_stale_entry_and_an_unknown_tunable(
    config_json, tmp_path, capsys
):
    out = tmp_path / "p"
    _tune(out)
    check = ["--check", "llama", "--checkpoint", str(config_json), "--out", str(out)]
    check += ["--device", DEVICE]
    assert tune.main(check) == 0
    path = out / f"{DEVICE}.json"
    clean = path.read_text()

    # A shape no step has: stale.
    profile = Profile.load(path)
    profile.add(GEMV, M=4096, K=4096, tile_m=4)
    profile.save(path)
    capsys.readouterr()
    assert tune.main(check) == tune.EXIT_CHECK
    printed = capsys.readouterr().out
    assert "GEMV(M=4096, K=4096) matches no step" in printed
    assert f"entry {len(profile)} (line {len(profile) + 2})" in printed

    # A tunable the operator no longer declares.
    lines = clean.splitlines()
    lines[2] = lines[2].replace('"num_aie_columns"', '"tile_q": 4, "num_aie_columns"')
    path.write_text("\n".join(lines) + "\n")
    problems, _ = tune.check_profiles(
        LlamaApplication(), LlamaConfig.tiny(), out, [DEVICE]
    )
    assert len(problems) == 1
    assert "no longer declares 'tile_q'" in problems[0]
    assert "entry 1 (line 3)" in problems[0]
    # ... which a graph refuses to apply rather than silently keep.
    with pytest.raises(ValueError, match="tile_q"):
        Profile.load(path)


def test_check_of_a_missing_profile_fails(config_json, tmp_path, capsys):
    check = ["--check", "llama", "--checkpoint", str(config_json)]
    check += ["--out", str(tmp_path / "none"), "--device", "npu1"]
    assert tune.main(check) == tune.EXIT_CHECK
    assert "no profile for npu1" in capsys.readouterr().out


def test_weights_q4_tunes_the_packed_versions_qgemv(config_json, tmp_path, capsys):
    # A bf16 tune records no QGEMV; --weights q4 holds the matrices packed,
    # as iron-lm generate --weights q4 does, so its QGEMV shapes are tuned.
    out = tmp_path / "profiles"
    argv = ["llama", "--checkpoint", str(config_json), "--device", DEVICE]
    argv += ["--out", str(out), "--cache", str(tmp_path / "c.jsonl"), "--no-progress"]
    assert tune.main([*argv, "--weights", "q4", "--ops", "QGEMV"]) == 0
    profile = Profile.load(out / f"{DEVICE}.json")
    config = LlamaConfig.tiny()
    steps = _steps(_graph(config, None, "q4"), DEVICE)
    shapes = {(op.M, op.K, op.bits) for op in steps if type(op).__name__ == "QGEMV"}
    entries = {(d["M"], d["K"], d["bits"]) for cls, d, _ in profile}
    assert shapes and entries == shapes
    assert all(cls.__name__ == "QGEMV" for cls, _, _ in profile)
    assert profile.meta["versions"][-1].endswith("weights=q4")
    capsys.readouterr()
    assert tune.main([*argv, "--weights", "q5"]) == tune.EXIT_ERROR
    assert "--weights takes one or more of bf16, q8, q4" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"weights takes one or more of"):
        LlamaApplication(weights="q5")


# -- call-site keywords --------------------------------------------------------------


class _Twice(iron.Graph):
    """Two AXPY steps of one shape; the second pins its columns at the call."""

    def body(self, x, y):
        a = AXPY.step(x, y, scalar_factor=1.5)
        return AXPY.step(a, y, scalar_factor=1.5, num_aie_columns=1)


class _Pinned(iron.Graph):
    """One AXPY step that pins its columns at the call."""

    def body(self, x, y):
        return AXPY.step(x, y, scalar_factor=1.5, num_aie_columns=1)


class _GraphApp:
    """A one-graph application, for tests."""

    def __init__(self, graph: iron.Graph) -> None:
        self.graph = graph
        self.name = type(graph).__name__

    def versions(self, config, dev):
        with iron.use_device(dev):
            return {"only": self.graph.record(x=(4096,), y=(4096,))}


def test_a_call_site_keyword_beats_the_profile(tmp_path):
    out = tmp_path / "p"
    tune.tune(
        _GraphApp(_Twice()), None, DEVICE, out=out, cache=tmp_path / "c", progress=False
    )
    profile = Profile.load(out / f"{DEVICE}.json")
    ((cls, dims, tunables),) = list(profile)
    assert cls is AXPY and dims == {"size": 4096, "scalar_factor": 1.5}
    assert tunables["num_aie_columns"] != 1  # the first step leaves it open

    graph = _Twice()
    graph.profile = out
    with iron.use_device(DEVICE):
        first, second = graph.record(x=(4096,), y=(4096,)).steps
    assert _tunables(first.op) == tunables and not first.op.pinned
    assert second.op.num_aie_columns == 1 and second.op.pinned == {"num_aie_columns"}
    assert second.op.tile_size == tunables["tile_size"]


# -- --check reads a profile file as Profile.load does (one parser) -------------------


def _check_one(tmp_path: Path, text: str) -> tuple[Path, list[str], list[str]]:
    """Check a profile file holding ``text`` against the one-graph ``_Twice``."""
    out = tmp_path / "p"
    out.mkdir()
    path = out / f"{DEVICE}.json"
    path.write_text(text)
    problems, notes = tune.check_profiles(_GraphApp(_Twice()), None, out, [DEVICE])
    return path, problems, notes


AXPY_ENTRY = (
    '{"operator": "AXPY", "size": 4096, "scalar_factor": 1.5, "num_aie_columns": 2}'
)


def test_check_refuses_a_meta_that_is_not_an_object_as_load_does(tmp_path):
    path, problems, _ = _check_one(
        tmp_path, '{"meta": ["npu2"],\n "entries": [\n  ' + AXPY_ENTRY + "\n]}\n"
    )
    with pytest.raises(ValueError) as refused:
        Profile.load(path)
    assert '"meta" is a JSON array, not an object' in str(refused.value)
    assert problems == [str(refused.value)]


def test_check_names_an_entry_by_the_line_load_names(tmp_path):
    # Not the layout save() writes: the first entry shares the line of "entries".
    text = (
        '{"entries": [{"operator": "AXPY", "tile_q": 4, "num_aie_columns": 2},\n'
        "  " + AXPY_ENTRY + "\n]}\n"
    )
    path, problems, _ = _check_one(tmp_path, text)
    with pytest.raises(ValueError) as refused:
        Profile.load(path)
    assert f"{path}: entry 1 (line 1): " in str(refused.value)
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: entry 1 (line 1): ")
    assert "no longer declares 'tile_q'" in problems[0]


def test_a_tunable_every_step_pins_is_not_tuned(tmp_path):
    out = tmp_path / "p"
    tune.tune(
        _GraphApp(_Pinned()),
        None,
        DEVICE,
        out=out,
        cache=tmp_path / "c",
        progress=False,
    )
    ((_, _, tunables),) = list(Profile.load(out / f"{DEVICE}.json"))
    assert list(tunables) == ["tile_size"]


# -- measures and errors ----------------------------------------------------------


def test_xrt_is_named_when_it_cannot_measure(
    config_json, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(select, "_chosen", "xrt")
    argv = ["llama", "--checkpoint", str(config_json), "--out", str(tmp_path / "o")]
    assert tune.main(argv) == tune.EXIT_ERROR
    err = capsys.readouterr().err
    assert "tuning on the xrt backend times real device calls" in err
    assert "IRON_BACKEND=emu" in err
    assert not (tmp_path / "o").exists()


def test_modelled_seconds_is_the_cost_model():
    op = GEMV(M=2048, K=2048).resolved(DEVICE)
    expected = step_time(op, iron.NPU2, dispatches=1).seconds
    assert tune.modelled_seconds(op, iron.NPU2) == expected


def test_unknown_names_are_errors(config_json, capsys):
    assert tune.main(["lama", "--checkpoint", str(config_json)]) == tune.EXIT_ERROR
    assert "did you mean 'llama'" in capsys.readouterr().err
    argv = ["llama", "--checkpoint", str(config_json), "--ops", "GEMX"]
    assert tune.main(argv) == tune.EXIT_ERROR
    assert "['GEMX'] are not operators" in capsys.readouterr().err


def test_the_registry_names_llama():
    assert APPLICATIONS["llama"] is LlamaApplication
    app = application("llama")
    assert app.profiles_dir() == PROFILES
    assert PROFILES.parts[-4:] == ("lm", "applications", "llama", "profiles")
    with pytest.raises(KeyError, match="known applications"):
        application("gpt")


def test_versions_record_without_weights():
    config = LlamaConfig.from_json(DEFAULT_CONFIG)
    weights = placeholder_state_dict(config)
    assert all(not any(w.strides) for w in weights.values())  # views of one zero
    versions = LlamaApplication().versions(config, DEVICE)
    assert set(versions) == {"prompt", "decode"}
    assert all(r.steps for r in versions.values())


# -- the shipped profiles ------------------------------------------------------------


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_shipped_profile_matches_the_1b_application(device):
    # bf16, and 4-bit and 8-bit weights: the QGEMV entries match the packed
    # versions' steps (python -m iron.lm.tune llama --weights q4,q8 --ops QGEMV).
    app = LlamaApplication(weights=("bf16", "q4", "q8"))
    config = app.load_config(DEFAULT_CONFIG)
    label = f"llama-3.2-1b (sha256 {app.config_digest(config)})"
    problems, notes = tune.check_profiles(
        app, config, PROFILES, [device], config_label=label
    )
    assert problems == []
    # Every operator shape of every version has an entry but the packed
    # prompt's QGEMM (not tuned here).
    assert all("QGEMM(" in note for note in notes)
    entries = Profile.for_device(PROFILES, device)
    assert sum(cls.__name__ == "QGEMV" for cls, _, _ in entries) == 10
    meta = Profile.load(PROFILES / f"{device}.json").meta
    assert meta["measured_by"] == "cost model (emulated NPU)" and meta["modelled"]
    assert (meta["device"], meta["config"]) == (device, label)
    assert meta["command"].startswith("python -m iron.lm.tune llama --checkpoint ")
    assert meta["command"].endswith(f"llama-3.2-1b.json --device {device}")


@pytest.mark.parametrize("device", ["npu1", "npu2"])
@pytest.mark.parametrize("name", ["llama-3.2-3b", "llama-3.1-8b"])
def test_shipped_3b_and_8b_profiles_cover_every_shape_of_their_versions(name, device):
    """Issue 34: each larger Llama's profiles match its config's bf16,
    q4 and q8 versions with no stale entry and leaves no shape uncovered,
    and Llama applies it for a config of those shapes (its own directory)."""
    from iron.lm.applications.llama import CONFIGS, profiles_for

    app = LlamaApplication(weights=("bf16", "q4", "q8"))
    config = app.load_config(CONFIGS / f"{name}.json")
    label = f"{name} (sha256 {app.config_digest(config)})"
    directory = PROFILES / name
    problems, notes = tune.check_profiles(
        app, config, directory, [device], config_label=label
    )
    assert problems == [] and notes == []
    meta = Profile.load(directory / f"{device}.json").meta
    assert meta["measured_by"] == "cost model (emulated NPU)" and meta["modelled"]
    assert meta["config"] == label
    assert profiles_for(config) == directory
    assert profiles_for(LlamaConfig.from_json(DEFAULT_CONFIG)) == PROFILES


def test_check_of_the_shipped_profiles_covers_every_weights(capsys):
    # The shipped profiles hold bf16 and packed (QGEMV) entries: a plain
    # --check records the versions of all three weights, so none is stale;
    # checked against bf16 alone the QGEMV entries match no step.
    assert tune.main(["--check", "llama", "--device", "npu2"]) == 0
    assert "clean for llama" in capsys.readouterr().out
    check = ["--check", "llama", "--device", "npu2", "--weights", "bf16"]
    assert tune.main(check) == tune.EXIT_CHECK
    assert "QGEMV(M=128256, K=2048, bits=4" in capsys.readouterr().out


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_shipped_profile_is_applied_by_default(device):
    config = LlamaConfig.from_json(DEFAULT_CONFIG)
    graph = Llama(config, context=2048)
    assert Path(graph.profile) == PROFILES
    graph.load_state_dict(placeholder_state_dict(config))
    profile = Profile.for_device(PROFILES, device)
    used = set()
    steps = _steps(graph, device)
    for weights in ("q4", "q8"):  # a packed model's QGEMV steps take theirs
        steps += _steps(_graph(config, PROFILES, weights), device)
    for op in steps:
        given = profile.tunables_for(type(op), tune.call_dims(op))
        assert {k: getattr(op, k) for k in given} == given
        for index, (cls, dims, _) in enumerate(profile):
            if type(op) is cls and Profile.matches(dims, tune.call_dims(op)):
                used.add(index)
    assert used == set(range(len(profile)))


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_applying_the_shipped_profile_changes_the_tunables_it_names(device):
    """The cost model tells settings apart, so the shipped profile moves tunables."""
    profile = Profile.for_device(PROFILES, device)
    assert profile.meta["all_settings_tied"] < len(profile)
    config = LlamaConfig.from_json(DEFAULT_CONFIG)
    plain_graph, tuned_graph = _graph(config, None), _graph(config, PROFILES)
    plain, tuned = _steps(plain_graph, device), _steps(tuned_graph, device)
    assert len(plain) == len(tuned)
    changed = 0
    for before, after in zip(plain, tuned):
        given = profile.tunables_for(type(after), tune.call_dims(after))
        assert {k: getattr(after, k) for k in given} == given
        if _tunables(before) != _tunables(after):
            changed += 1
            assert given, f"{after} changed without an entry"
    assert changed > 0
    # The file itself names values that differ from resolve()'s.
    differ = [
        (cls, dims)
        for cls, dims, tunables in profile
        for op in plain
        if type(op) is cls
        and Profile.matches(dims, tune.call_dims(op))
        and any(getattr(op, k) != v for k, v in tunables.items())
    ]
    assert differ
    # And each version models faster under it than under resolve()'s defaults.
    for before, after in zip(
        _versions(plain_graph, device), _versions(tuned_graph, device)
    ):
        assert iron.roofline(after).seconds < iron.roofline(before).seconds


def test_the_default_profile_drives_the_recorded_tunables(tmp_path):
    """Edit one shipped entry in a copy: the Llama recorded under it follows."""
    copy = tmp_path / "profiles"
    copy.mkdir()
    profile = Profile.for_device(PROFILES, DEVICE)
    edited = Profile()
    edited.meta = profile.meta
    for cls, dims, tunables in profile:
        if cls is GEMV and (dims["M"], dims["K"]) == (2048, 2048):
            assert tunables["tile_m"] != 2
            tunables["tile_m"] = 2
        edited.add(cls, **dims, **tunables)
    edited.save(copy / f"{DEVICE}.json")
    config = LlamaConfig.from_json(DEFAULT_CONFIG)
    shipped = _steps(_graph(config, PROFILES), DEVICE)
    moved = _steps(_graph(config, copy), DEVICE)
    square = [
        (a, b)
        for a, b in zip(shipped, moved)
        if type(a) is GEMV and (a.M, a.K) == (2048, 2048)
    ]
    assert square and all(b.tile_m == 2 != a.tile_m for a, b in square)


def test_the_tuner_takes_the_fastest_setting_whose_design_is_legal():
    """Issue 15, failure 5: a setting check() accepts but whose NPU design
    breaks a device limit is passed over for the next fastest. Here
    Llama-3.1-8B's q4 down projection with QGEMV's tile_m=512: its weight
    walk steps 1146880 words, past the shim's 20-bit step (the attention
    setting this test used, 258 descriptors of 16, streams in groups with
    waits since issue 34)."""
    from iron.core.device import as_device
    from iron.lm.tune.legal import design_refusal, first_legal
    from iron.operators import QGEMV

    dev = as_device("npu2")
    base = QGEMV(M=4096, K=14336, bits=4, group=32, num_aie_columns=8)
    bad = {"tile_m": 512, "tile_k": 64}
    good = {"tile_m": 256, "tile_k": 128}
    base.replace(**bad).resolved(dev).check(dev)  # the operator accepts it
    assert "20-bit step" in design_refusal(base.replace(**bad), dev)
    assert design_refusal(base.replace(**good), dev) is None
    ranked = [((1.0,), bad), ((2.0,), good)]
    picked = first_legal(ranked, lambda s: [base.replace(**s)], dev, "qgemv")
    assert picked == ((2.0,), good)
    assert first_legal(ranked[:1], lambda s: [base.replace(**s)], dev, "x") is None


# -- issue 14: where profiles are written, and clear errors for bad paths ----------


def _bytes_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.json"))}


def test_without_out_profiles_go_to_the_working_directory(
    config_json, tmp_path, monkeypatch
):
    shipped = _bytes_of(PROFILES)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = ["llama", "--checkpoint", str(config_json), "--device", DEVICE]
    assert tune.main([*argv, "--ops", "GEMV", "--no-progress"]) == 0
    assert Profile.load(work / "profiles" / f"{DEVICE}.json").meta["device"] == DEVICE
    # the profiles inside the package were not touched
    assert _bytes_of(PROFILES) == shipped


def test_shipped_compares_and_never_writes_the_package(
    config_json, tmp_path, monkeypatch, capsys
):
    """Issue 35: --shipped rewrote the tracked profiles; now it tunes into
    --out (default ./profiles) and compares with the shipped files."""
    own = tmp_path / "own"
    argv = ["llama", "--checkpoint", str(config_json), "--device", DEVICE]
    tuned = ["--ops", "GEMV", "--no-progress"]
    assert tune.main([*argv, *tuned, "--out", str(own)]) == 0  # "shipped" ones
    monkeypatch.setattr(LlamaApplication, "profiles_dir", lambda self: own)
    monkeypatch.chdir(tmp_path)
    before = _bytes_of(own)
    capsys.readouterr()
    assert tune.main([*argv, *tuned, "--shipped"]) == 0
    assert f"{DEVICE}: reproduces the shipped {own / f'{DEVICE}.json'}" in (
        capsys.readouterr().out
    )
    assert _bytes_of(own) == before  # the package's files untouched
    assert (tmp_path / "profiles" / f"{DEVICE}.json").is_file()
    # a shipped entry that a tune does not reproduce is named, and exits 1
    path = own / f"{DEVICE}.json"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"operator": "GEMV"' in line)
    entry = json.loads(lines[at].strip().rstrip(","))
    entry["tile_m"] = 1 if entry["tile_m"] != 1 else 2
    lines[at] = "  " + json.dumps(entry) + ("," if lines[at].endswith(",") else "")
    path.write_text("\n".join(lines) + "\n")
    assert tune.main([*argv, *tuned, "--shipped"]) == tune.EXIT_CHECK
    out = capsys.readouterr().out
    assert f"{DEVICE}: differs from the shipped" in out
    assert f"shipped -> tuned now: tile_m {entry['tile_m']!r} ->" in out
    # only an explicit path writes them
    assert tune.main([*argv, *tuned, "--shipped", "--out", str(own)]) == 0
    assert "reproduces the shipped" in capsys.readouterr().out


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_a_fresh_tune_reproduces_the_shipped_profiles(device, tmp_path):
    """Tutorial 7's commands (to --out, not the package) give the shipped
    files' every entry; npu2's CausalAttention and decode RoPE entries were
    stale: tuned before npu2's cost model moved to its 63 GB/s DMA roof."""
    from iron.lm.tune.check import compare_profiles

    out, cache = tmp_path / "out", tmp_path / "cache.jsonl"
    common = ["llama", "--device", device, "--out", str(out), "--cache", str(cache)]
    assert tune.main([*common, "--no-progress"]) == 0
    assert tune.main([*common, "--weights", "q4,q8", "--ops", "QGEMV"]) == 0
    assert compare_profiles(out, PROFILES, device) == []


def _bad_path_case(tmp_path: Path, case: str) -> tuple[list[str], list[str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    a_dir = tmp_path / "a-dir"
    a_dir.mkdir()
    return {
        "out is a file": (["--out", str(a_file)], ["--out", "is a file"]),
        "out under a file": (
            ["--out", str(a_file / "p")],
            ["--out", "cannot be created", "is a file"],
        ),
        "cache is a directory": (
            ["--out", str(tmp_path / "o"), "--cache", str(a_dir)],
            ["--cache", "is a directory; give a file"],
        ),
        "cache under a file": (
            ["--out", str(tmp_path / "o"), "--cache", str(a_file / "c.jsonl")],
            ["--cache", "cannot be created"],
        ),
    }[case]


@pytest.mark.parametrize(
    "case",
    ["out is a file", "out under a file", "cache is a directory", "cache under a file"],
)
def test_bad_out_and_cache_are_clear_errors(config_json, tmp_path, capsys, case):
    extra, words = _bad_path_case(tmp_path, case)
    argv = ["llama", "--checkpoint", str(config_json), "--device", DEVICE, *extra]
    assert tune.main(argv) == tune.EXIT_ERROR
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for word in words:
        assert word in err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root writes anywhere: an unwritable directory cannot be made",
)
def test_an_unwritable_cache_is_a_clear_error(config_json, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        argv = ["llama", "--checkpoint", str(config_json), "--out", str(tmp_path)]
        argv += ["--cache", str(locked / "c.jsonl")]
        assert tune.main(argv) == tune.EXIT_ERROR
        assert "--cache" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)
