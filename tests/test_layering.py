"""The package's architecture as a test: layers, cycles, private names, folder sizes.

The rules are the ones docs/design.md states. Each is checked on the import graph that
`ast` reads from the source (imports inside functions count as edges too: an import hidden
in a function still ties the two modules together), so a change that breaks a rule fails
here with the offending modules named, not in a later review.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedanon"

# Lowest layer first. A module may import modules of its own layer and of the layers below.
LAYERS: list[tuple[str, ...]] = [
    ("fedanon.errors", "fedanon.kit"),
    ("fedanon.data", "fedanon.crypto", "fedanon.proto"),
    ("fedanon.stats", "fedanon.dp"),
    ("fedanon.model",),
    ("fedanon.engine", "fedanon.microagg"),
    ("fedanon.oracle", "fedanon.report"),
    ("fedanon.protocols",),
    ("fedanon.parties",),
    ("fedanon.consortium", "fedanon.frame", "fedanon"),
    ("fedanon.cli", "fedanon.__main__"),
]

MAX_MODULES_PER_FOLDER = 12


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module a dotted import target names (a name inside a module resolves to the module)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.depth = 0
        self.edges: list[tuple[str, bool, int]] = []       # (target module, inside a function, line)
        self.private: list[tuple[str, str, int]] = []      # (source module, private name, line)
        self.grpc: list[int] = []
        self.external: list[tuple[str, int]] = []           # (imported module outside fedanon, line)

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        # `if TYPE_CHECKING:` imports exist for annotations only and never run
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "grpc":
                self.grpc.append(node.lineno)
            if not alias.name.startswith("fedanon"):
                self.external.append((alias.name, node.lineno))
            target = _resolve(alias.name)
            if target:
                self.edges.append((target, self.depth > 0, node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        if node.module.split(".")[0] == "grpc":
            self.grpc.append(node.lineno)
        if not node.module.startswith("fedanon"):
            self.external.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
        for alias in node.names:
            target = _resolve(f"{node.module}.{alias.name}")
            if target:
                self.edges.append((target, self.depth > 0, node.lineno))
                if target != f"{node.module}.{alias.name}" and alias.name.startswith("_") \
                        and not alias.name.startswith("__"):
                    self.private.append((target, alias.name, node.lineno))


def _scan() -> dict[str, _Imports]:
    out = {}
    for module, path in MODULES.items():
        visitor = _Imports(module)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        out[module] = visitor
    return out


SCAN = _scan()


def _layer(module: str) -> int:
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS (and to docs/design.md)"
    return best


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_no_import_runs_upward() -> None:
    upward = [f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)}), line {line}"
              for m, scan in SCAN.items() for t, _lazy, line in scan.edges
              if _layer(t) > _layer(m)]
    assert not upward, "\n".join(upward)


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for m, scan in SCAN.items():
        for t, _lazy, _line in scan.edges:
            if t != m:
                graph[m].add(t)
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in MODULES:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_private_name_crosses_a_module() -> None:
    crossing = [f"{m}, line {line}: imports {name} from {source}"
                for m, scan in SCAN.items() for source, name, line in scan.private if source != m]
    assert not crossing, "\n".join(crossing)



@pytest.mark.parametrize("layer", ["fedanon.protocols", "fedanon.engine", "fedanon.model", "fedanon.stats",
                                   "fedanon.data"])
def test_no_grpc_below_the_parties(layer: str) -> None:
    offenders = [f"{m}, line {line}" for m, scan in SCAN.items() if m.startswith(layer + ".")
                 for line in scan.grpc]
    offenders += [f"{m} imports {t}" for m, scan in SCAN.items() if m.startswith(layer + ".")
                  for t, _lazy, _line in scan.edges if t == "fedanon.proto" or t.startswith("fedanon.proto.")]
    assert not offenders, "\n".join(offenders)


def test_engine_never_imports_protocols_or_parties() -> None:
    offenders = [f"{m} imports {t}" for m, scan in SCAN.items()
                 if m.startswith(("fedanon.engine", "fedanon.model", "fedanon.stats", "fedanon.data"))
                 for t, _lazy, _line in scan.edges if t.startswith(("fedanon.protocols", "fedanon.parties"))]
    assert not offenders, "\n".join(offenders)


KEYED_PRIMITIVES = ("cryptography.hazmat.primitives.ciphers", "coincurve", "gmpy2", "phe")


def test_keyed_primitives_live_in_crypto() -> None:
    """Ciphers, curve arithmetic and big-number crypto only inside fedanon.crypto (the PKI's
    certificate handling in fedanon.parties.pki uses `cryptography.x509` and signatures, which
    are not on this list); coincurve's private binding only in fedanon.crypto.secp256k1."""
    outside = [f"{m}, line {line}: {name}" for m, scan in SCAN.items() if not m.startswith("fedanon.crypto")
               for name, line in scan.external if name.startswith(KEYED_PRIMITIVES)]
    private = [f"{m}, line {line}: {name}" for m, scan in SCAN.items() if m != "fedanon.crypto.secp256k1"
               for name, line in scan.external if name.startswith("coincurve._")]
    assert not outside + private, "\n".join(outside + private)


def test_no_command_imports_another_command() -> None:
    """What several commands share lives below them (fedanon.cli.kit, fedanon.consortium), so a
    command module is never a library of another."""
    from fedanon.cli import SUBCOMMAND_MODULES

    commands = {f"fedanon.cli.{name}" for name in SUBCOMMAND_MODULES}
    offenders = [f"{m} imports {t}, line {line}" for m, scan in SCAN.items() if m in commands
                 for t, _lazy, line in scan.edges if t in commands and t != m]
    outside = [f"{m} imports {t}, line {line}" for m, scan in SCAN.items() if not m.startswith("fedanon.cli")
               for t, _lazy, line in scan.edges if t in commands]
    assert not offenders + outside, "\n".join(offenders + outside)


def test_no_folder_holds_more_than_twelve_modules() -> None:
    crowded = []
    for folder in [PACKAGE, *[p for p in PACKAGE.rglob("*") if p.is_dir()]]:
        modules = [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
                   and not p.name.endswith(("_pb2.py", "_pb2_grpc.py"))]
        if len(modules) > MAX_MODULES_PER_FOLDER:
            crowded.append(f"{folder.relative_to(PACKAGE.parent)}: {len(modules)} modules")
    assert not crowded, "\n".join(crowded)


def test_the_rules_see_a_violation() -> None:
    """The scanner itself must be able to fail: a synthetic upward, private, lazy import is seen."""
    source = "def f():\n    from fedanon.cli.anonymize import _private\n"
    visitor = _Imports("fedanon.engine.anonymizer")
    visitor.visit(ast.parse(source))
    assert visitor.edges == [("fedanon.cli.anonymize", True, 2)]
    assert visitor.private == [("fedanon.cli.anonymize", "_private", 2)]
    assert _layer("fedanon.cli.anonymize") > _layer("fedanon.engine.anonymizer")
