"""The two wings (docs/architecture.md): the library never imports the pipeline, and no module
or package imports another that imports it back. Read from the source (every import statement, including
the ones inside functions), so a lazy import cannot hide a wrong-way dependency."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "kernelscale"

# the pipeline wing is one sub-package: config, CLI, data stage, training runs, tracking,
# tables, plots
PIPELINE = ("kernelscale.pipeline",)
# third-party packages only the pipeline may use
PIPELINE_ONLY_DEPS = ("mlflow", "snakemake", "matplotlib", "pandas", "jsonschema", "pooch")


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _is_pipeline(mod: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in PIPELINE)


def _imports(mod: str, path: Path) -> set[str]:
    """Modules of kernelscale (and third-party top-level names) that ``mod`` imports."""
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for a in node.names:  # `from . import x`: x may be a submodule
                sub = f"{target}.{a.name}"
                found.add(sub if sub in MODULES else target)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if not _is_pipeline(m)))
def test_library_never_imports_the_pipeline(mod):
    bad = sorted(t for t in GRAPH[mod] if t.startswith("kernelscale") and _is_pipeline(t))
    assert not bad, f"library module {mod} imports pipeline module(s) {bad}"
    deps = sorted(t for t in GRAPH[mod] if t.split(".")[0] in PIPELINE_ONLY_DEPS)
    assert not deps, f"library module {mod} imports pipeline-only package(s) {deps}"


def test_the_pipeline_is_one_subpackage():
    """Every pipeline module lives under kernelscale/pipeline/, so the boundary is a folder."""
    assert (PKG / "pipeline" / "__init__.py").is_file()
    assert "kernelscale.pipeline.cli" in MODULES and "kernelscale.pipeline.data" in MODULES
    top = sorted(m for m in MODULES if m.count(".") == 1 and not _is_pipeline(m))
    assert not [m for m in top if m.split(".")[1] in ("cli", "registry", "tracking", "data")], top


def _cycles(edges: dict[str, set[str]], nested_ok: bool = True) -> list[str]:
    """Cycles of a directed graph found by depth-first search (each as "a -> b -> a"). With
    ``nested_ok`` a cycle through a package and its own submodules only is not one (a package
    imports its own submodules by design)."""
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cyc = stack[stack.index(t):] + [t]
                if not nested_ok or not all(c == cyc[0] or c.startswith(cyc[0] + ".") for c in cyc):
                    cycles.append(" -> ".join(cyc))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return cycles


def test_no_import_cycles():
    edges = {m: {t for t in ts if t in MODULES and t != m} for m, ts in GRAPH.items()}
    cycles = _cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _unit(mod: str) -> str:
    """The package-level unit of a module: its sub-package of kernelscale (kernelscale.solvers,
    kernelscale.pipeline, ...), or the top-level module itself (kernelscale.stream, ...)."""
    return ".".join(mod.split(".")[:2])


def test_no_package_cycles():
    """No import cycle between packages: each sub-package of kernelscale (with all its
    sub-packages) and each top-level module is one unit, and the units import one way only."""
    edges: dict[str, set[str]] = {}
    for m, ts in GRAPH.items():
        edges.setdefault(_unit(m), set()).update(
            _unit(t) for t in ts if t in MODULES and _unit(t) != _unit(m))
    assert {"kernelscale.kernels", "kernelscale.solvers", "kernelscale.estimators",
            "kernelscale.pipeline", "kernelscale.stream"} <= set(edges)
    cycles = _cycles(edges, nested_ok=False)
    assert not cycles, "package import cycles:\n" + "\n".join(cycles)


def test_every_random_stream_is_named_in_rng():
    """Every ``block_generator`` call in the library names its stream by a constant of
    ``kernelscale.rng`` (no literal ids scattered over modules), and the model streams are
    distinct but for the two documented aliases (the preconditioners' draws, which never meet
    random binning in one fit)."""
    import ast

    from kernelscale import rng

    names = {k for k, v in vars(rng).items() if k.isupper() and isinstance(v, int)
             and not k.startswith("_")}
    calls = 0
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "block_generator"):
                calls += 1
                assert len(node.args) == 3 and isinstance(node.args[2], ast.Name) \
                    and node.args[2].id in names, f"{path.name}:{node.lineno}"
    assert calls >= 10
    model = [rng.FOURIER, rng.UDSG_REUSE, rng.BATCH_PIECES, rng.BATCH_ROWS, rng.RB_GRIDS,
             rng.RB_CD_ORDER, rng.ROW_FINGERPRINT]
    assert len(set(model)) == len(model)
    assert {rng.PRECONDITIONER_SUBSAMPLE, rng.PRECONDITIONER_SKETCH} <= {rng.RB_GRIDS,
                                                                         rng.RB_CD_ORDER}
    data = [rng.DATA_MODEL, rng.DATA_ROWS, rng.DATA_DEFORMED, rng.DATA_BAYES]
    assert len(set(data)) == len(data)


def _estimator_classes():
    import inspect

    from sklearn.base import BaseEstimator

    import kernelscale

    return [getattr(kernelscale, n) for n in kernelscale.__all__
            if inspect.isclass(getattr(kernelscale, n))
            and issubclass(getattr(kernelscale, n), BaseEstimator)]


def test_every_estimator_has_the_one_base_and_the_targets_mixins():
    """One base (declared rules, engine, warm-start test) under every public estimator; every
    classifier predicts through ``LabelsFromScores`` and every multi-output regressor through
    ``TargetsFromOutputs`` (``estimators._targets``), and fits through ``ClassifierTargets`` /
    ``RegressorTargets`` except DSG's classifier (its labels may stay on disk, read by its
    ``LabelCoder`` chunk by chunk). LIBSVM's regressor fits one output and keeps scikit-learn's checks."""
    from sklearn.base import is_classifier, is_regressor

    from kernelscale.estimators._targets import (
        ClassifierTargets,
        LabelsFromScores,
        RegressorTargets,
        TargetsFromOutputs,
    )
    from kernelscale.params import KernelscaleEstimator

    classes = _estimator_classes()
    assert len(classes) >= 18
    for cls in classes:
        assert issubclass(cls, KernelscaleEstimator), cls.__name__
        streamed_labels = cls.__name__.startswith("DSG")
        if is_classifier(cls()):
            assert issubclass(cls, LabelsFromScores), cls.__name__
            assert streamed_labels or issubclass(cls, ClassifierTargets), cls.__name__
        elif is_regressor(cls()) and cls.__name__ != "ExactSVMRegressor":
            assert issubclass(cls, TargetsFromOutputs), cls.__name__
            # DSG's too: every regressor's targets are centred by RegressorTargets (y_offset_)
            assert issubclass(cls, RegressorTargets), cls.__name__
