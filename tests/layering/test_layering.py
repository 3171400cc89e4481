"""Layering and wheel-content checks under pytest.

The three layering checks are the ones ``nox -s layering`` runs
(``check_layering.py``); the rest pin the checkers themselves on small
synthetic trees and wheels, so a checker that stopped seeing a violation
fails here.
"""

from __future__ import annotations

import importlib.util
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and friends look modules up here
    spec.loader.exec_module(module)
    return module


check_layering = _load("check_layering")
check_wheels = _load("check_wheels")


def _report(problems: list[str]) -> str:
    return "\n".join(problems)


def _fail_on(problems: list[str]) -> None:
    if problems:
        pytest.fail(_report(problems), pytrace=False)


# -- the real checks ------------------------------------------------------------


def test_import_iron_loads_no_other_distribution():
    _fail_on(check_layering.check_import_iron())


def test_graph_resolves_without_the_runtime():
    _fail_on(check_layering.check_graph_is_lazy())


def test_core_sources_import_no_other_distribution():
    _fail_on(check_layering.check_core_sources())


def test_no_distribution_imports_another_s_underscore_names():
    _fail_on(check_layering.check_private_imports())


def test_core_declares_numpy_and_ml_dtypes():
    declared = check_layering.declared_imports(
        check_layering.CORE_DIR / "pyproject.toml"
    )
    assert {"numpy", "ml_dtypes"} <= declared


# -- the source scanner ----------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return src


CLEAN = {
    "iron/__init__.py": """
        from pkgutil import extend_path
        __path__ = extend_path(__path__, __name__)
        from . import core
        from iron.core import device
    """,
    "iron/core/__init__.py": "",
    "iron/core/device.py": """
        from __future__ import annotations
        import json, importlib.metadata
        import numpy as np
        import ml_dtypes
        from . import percall
        from .percall import Affine
        from .. import core
        from iron import Graph
    """,
    "iron/core/percall.py": "Affine = int\n",
}

VIOLATIONS = {
    "import iron.runtime": "iron.runtime",
    "import iron.lm.llama as llama": "iron.lm.llama",
    "from iron.operators import AXPY": "iron.operators",
    "from iron import operators": "iron.operators",
    "from .. import runtime": "iron.runtime",
    "from ..lm.generate import generate": "iron.lm.generate",
    "def f():\n    import iron.operators\n": "iron.operators",
    "if TYPE_CHECKING:\n    from iron.runtime import CompiledGraph\n": "iron.runtime",
    "import importlib\nimportlib.import_module('iron.runtime.emu')\n": "iron.runtime.emu",
    "__import__('iron.lm')\n": "iron.lm",
    "import pyxrt": "pyxrt",
    "import torch": "torch",
}


def test_scanner_accepts_a_clean_tree(tmp_path):
    src = _tree(tmp_path, CLEAN)
    assert check_layering.scan_sources(src, {"numpy", "ml_dtypes"}) == []


@pytest.mark.parametrize("source,name", list(VIOLATIONS.items()))
def test_scanner_flags(tmp_path, source, name):
    src = _tree(tmp_path, {**CLEAN, "iron/core/bad.py": source})
    problems = check_layering.scan_sources(src, {"numpy", "ml_dtypes"})
    assert problems, f"not flagged: {source!r}"
    assert all("bad.py" in p for p in problems), _report(problems)
    assert any(name in p for p in problems), _report(problems)


def test_scanner_flags_an_undeclared_dependency(tmp_path):
    src = _tree(tmp_path, CLEAN)
    problems = check_layering.scan_sources(src, {"numpy"})
    assert any("ml_dtypes" in p for p in problems), _report(problems)


def test_scanner_flags_another_distributions_directory(tmp_path):
    src = _tree(tmp_path, {**CLEAN, "iron/runtime/__init__.py": ""})
    problems = check_layering.scan_sources(src, {"numpy", "ml_dtypes"})
    assert any("iron-runtime" in p for p in problems), _report(problems)


PRIVATE_IMPORTS = {
    "from iron.operators.movers import Access, _split_inner": "_split_inner",
    "from iron.operators.movers import (\n    Access,\n    _simplify,\n)": "_simplify",
    "from iron.core._indexing import _slice": "_indexing",
    "import iron.core._recording_graph": "_recording_graph",
    "def f():\n    from iron.operators import _EXACT\n": "_EXACT",
    "from ...operators.movers import _reach": "_reach",
}


@pytest.mark.parametrize("source,name", list(PRIVATE_IMPORTS.items()))
def test_private_import_scanner_flags(tmp_path, source, name):
    src = _tree(tmp_path, {"iron/runtime/npu/bad.py": source})
    problems = check_layering.scan_private_imports(src, "iron.runtime")
    assert problems, f"not flagged: {source!r}"
    assert any(name in p and "bad.py" in p for p in problems), _report(problems)


def test_private_import_scanner_passes_own_and_public_names(tmp_path):
    source = """
        from iron.runtime.npu import _common
        from iron.runtime.npu._common import _sequence_args
        from iron.core.dma import split_long_dims
        from iron.operators.movers import Access
        from iron.core import __version__
    """
    src = _tree(tmp_path, {"iron/runtime/npu/ok.py": source})
    assert check_layering.scan_private_imports(src, "iron.runtime") == []


# -- the wheel checker -----------------------------------------------------------


def _packages(tmp_path: Path) -> Path:
    files = {
        "iron-core/pyproject.toml": '[project]\nname = "iron-core"\n',
        "iron-core/src/iron/__init__.py": "",
        "iron-core/src/iron/py.typed": "",
        "iron-core/src/iron/core/__init__.py": "",
        "iron-ops/pyproject.toml": '[project]\nname = "iron-ops"\n',
        "iron-ops/src/iron/ops/__init__.py": "",
        "iron-ops/src/iron/ops/catalog.json": "{}",
    }
    root = tmp_path / "packages"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _build(dist: Path, name: str, payload: list[str], src_files: list[str]) -> None:
    dist.mkdir(exist_ok=True)
    stem = name.replace("-", "_")
    with zipfile.ZipFile(dist / f"{stem}-0.1.0-py3-none-any.whl", "w") as wheel:
        for path in payload:
            wheel.writestr(path, "")
        wheel.writestr(f"{stem}-0.1.0.dist-info/METADATA", "")
        wheel.writestr(
            f"{stem}-0.1.0.dist-info/entry_points.txt",
            "[iron.operators]\ncatalog = iron.ops:CATALOG\n",
        )
    with tarfile.open(dist / f"{stem}-0.1.0.tar.gz", "w:gz") as sdist:
        for path in src_files:
            info = tarfile.TarInfo(f"{stem}-0.1.0/src/{path}")
            sdist.addfile(info)


CORE_FILES = ["iron/__init__.py", "iron/py.typed", "iron/core/__init__.py"]
OPS_FILES = ["iron/ops/__init__.py", "iron/ops/catalog.json"]


def test_wheels_that_match_their_trees_pass(tmp_path):
    packages, dist = _packages(tmp_path), tmp_path / "dist"
    _build(dist, "iron-core", CORE_FILES, CORE_FILES)
    _build(dist, "iron-ops", OPS_FILES, OPS_FILES)
    problems, summaries = check_wheels.check_dir(dist, packages)
    assert problems == []
    assert any("iron.operators: catalog" in s for s in summaries), summaries


def test_a_sibling_wheel_with_the_namespace_init_fails(tmp_path):
    packages, dist = _packages(tmp_path), tmp_path / "dist"
    _build(dist, "iron-core", CORE_FILES, CORE_FILES)
    _build(dist, "iron-ops", [*OPS_FILES, "iron/__init__.py"], OPS_FILES)
    problems, _ = check_wheels.check_dir(dist, packages)
    assert any("contains iron/__init__.py" in p for p in problems), _report(problems)


def test_core_wheel_without_py_typed_fails(tmp_path):
    packages, dist = _packages(tmp_path), tmp_path / "dist"
    core = [f for f in CORE_FILES if f != "iron/py.typed"]
    _build(dist, "iron-core", core, CORE_FILES)
    _build(dist, "iron-ops", OPS_FILES, OPS_FILES)
    problems, _ = check_wheels.check_dir(dist, packages)
    assert any("lacks iron/py.typed" in p for p in problems), _report(problems)


def test_a_wheel_missing_package_data_fails(tmp_path):
    packages, dist = _packages(tmp_path), tmp_path / "dist"
    _build(dist, "iron-core", CORE_FILES, CORE_FILES)
    _build(dist, "iron-ops", OPS_FILES[:1], OPS_FILES[:1])
    problems, _ = check_wheels.check_dir(dist, packages)
    assert any("lacks iron/ops/catalog.json" in p for p in problems), _report(problems)
    assert any("lacks src/iron/ops/catalog.json" in p for p in problems)


def test_a_missing_wheel_fails(tmp_path):
    packages, dist = _packages(tmp_path), tmp_path / "dist"
    _build(dist, "iron-core", CORE_FILES, CORE_FILES)
    problems, _ = check_wheels.check_dir(dist, packages)
    assert any("iron-ops: expected one wheel" in p for p in problems)
