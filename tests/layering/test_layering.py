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


# -- (d) and (e): private modules and names ----------------------------------------


def test_private_modules_are_imported_only_by_their_package():
    _fail_on(check_layering.check_private_modules())


def test_no_distribution_imports_another_distributions_private_names():
    _fail_on(check_layering.check_private_names())


def _sources(tmp_path: Path, trees: dict[str, dict[str, str]]) -> dict:
    """Parsed synthetic trees, one per distribution."""
    return check_layering.load_sources(
        {dist: _tree(tmp_path / dist, files) for dist, files in trees.items()}
    )


CORE_TREE = {
    "iron/__init__.py": "",
    "iron/core/__init__.py": "from iron.core.tolerance import compare\n",
    "iron/core/tolerance.py": """
        from iron.core._bf16 import to_bf16
        def compare(): ...
    """,
    "iron/core/_bf16.py": """
        from typing import TYPE_CHECKING
        import numpy as np
        from iron.core.device import NPU2
        if TYPE_CHECKING:
            from iron.core.tolerance import Tolerance
        def to_bf16(): ...
    """,
    "iron/core/device.py": "NPU2 = 2\n",
}


def test_the_private_module_checker_accepts_a_clean_tree(tmp_path):
    # A sibling imports the private module, which imports an unrelated
    # sibling and, for types only, its importer.
    known = _sources(tmp_path, {"iron-core": CORE_TREE})
    assert check_layering.check_private_modules_in(known) == []


@pytest.mark.parametrize(
    "source,why",
    [
        ("from iron.core import compare\n", "imports its package iron.core"),
        ("from .. import core\n", "imports its package iron.core"),
        # the emit cycle of issue 19: emit.py's stubs import the private
        # module, which imports emit back
        ("from iron.core.tolerance import compare\n", "which imports it"),
        ("def f():\n    import iron.core.tolerance\n", "which imports it"),
    ],
)
def test_a_private_module_importing_its_parent_is_flagged(tmp_path, source, why):
    tree = {**CORE_TREE, "iron/core/_bf16.py": source}
    problems = check_layering.check_private_modules_in(
        _sources(tmp_path, {"iron-core": tree})
    )
    assert any("_bf16.py" in p and why in p for p in problems), _report(problems)


def test_a_private_module_imported_from_another_package_is_flagged(tmp_path):
    known = _sources(
        tmp_path,
        {
            "iron-core": CORE_TREE,
            "iron-lm": {"iron/lm/__init__.py": "from iron.core._bf16 import to_bf16\n"},
        },
    )
    problems = check_layering.check_private_modules_in(known)
    assert any("from outside iron.core" in p for p in problems), _report(problems)


OPERATORS_TREE = {
    "iron/operators/__init__.py": "",
    "iron/operators/movers.py": "def _simplify(): ...\ndef split(): ...\n",
    "iron/operators/_matmul_math.py": "def bound(): ...\n",
    "iron/operators/matmul.py": "from iron.operators._matmul_math import bound\n",
}


def test_the_private_name_checker_accepts_public_and_own_names(tmp_path):
    runtime = {
        "iron/runtime/__init__.py": "from iron.runtime._own import _x\n",
        "iron/runtime/_own.py": "_x = 1\n",
        "iron/runtime/design.py": """
            from iron.operators.movers import split
            from iron.operators import movers
            movers.split()
        """,
    }
    known = _sources(
        tmp_path,
        {
            "iron-core": CORE_TREE,
            "iron-operators": OPERATORS_TREE,
            "iron-runtime": runtime,
        },
    )
    assert check_layering.check_private_names_in(known) == []


@pytest.mark.parametrize(
    "source,name",
    [
        ("from iron.operators.movers import _simplify\n", "movers._simplify"),
        ("from iron.operators._matmul_math import bound\n", "_matmul_math.bound"),
        ("import iron.operators._matmul_math\n", "iron.operators._matmul_math"),
        ("from iron.operators import _matmul_math\n", "iron.operators._matmul_math"),
        ("from iron.operators import movers\nmovers._simplify()\n", "movers._simplify"),
        (
            "import iron.operators.movers as m\nm._simplify()\n",
            "iron.operators.movers._simplify",
        ),
        ("from iron.core._bf16 import to_bf16\n", "iron.core._bf16.to_bf16"),
        ("def f():\n    from iron.operators.movers import _simplify\n", "_simplify"),
        ("from ..operators.movers import _simplify\n", "_simplify"),
    ],
)
def test_another_distributions_private_name_is_flagged(tmp_path, source, name):
    runtime = {"iron/runtime/__init__.py": "", "iron/runtime/bad.py": source}
    known = _sources(
        tmp_path,
        {
            "iron-core": CORE_TREE,
            "iron-operators": OPERATORS_TREE,
            "iron-runtime": runtime,
        },
    )
    problems = check_layering.check_private_names_in(known)
    assert problems and all("bad.py" in p for p in problems), _report(problems)
    assert any(name in p for p in problems), _report(problems)


def test_underscore_imports_are_counted(tmp_path):
    known = _sources(tmp_path, {"iron-core": CORE_TREE})
    found = check_layering.underscore_imports(known)
    assert [f.rsplit(": ", 1)[1] for f in found] == ["iron.core._bf16.to_bf16"]


def test_one_class_per_public_name():
    # Issue 19 found three Plans, two Windows and Placed beside Placement.
    # Left: the Clamp operator (a catalog name) and iron.core.percall's Clamp
    # expression, which another part of the issue owns.
    shared = check_layering.shared_class_names(
        check_layering.load_sources(check_layering.SOURCES)
    )
    assert shared == {"Clamp": ["iron.core.percall", "iron.operators.activations"]}, (
        shared
    )


def test_a_second_class_of_one_name_is_found(tmp_path):
    tree = {
        **CORE_TREE,
        "iron/core/plan.py": "class Plan: ...\n",
        "iron/core/gemm.py": "class Plan: ...\nclass _Private: ...\n",
        "iron/core/other.py": "class _Private: ...\n",
    }
    shared = check_layering.shared_class_names(_sources(tmp_path, {"iron-core": tree}))
    assert shared == {"Plan": ["iron.core.gemm", "iron.core.plan"]}
