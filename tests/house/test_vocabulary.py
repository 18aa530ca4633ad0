"""One vocabulary across the package: each public name means one object, no two modules import
each other, codes and classes are named by their enums, and every document cited exists.

Each test names its exceptions explicitly (modules being rewritten elsewhere); the lists are
meant to shrink to empty once those modules are merged: a test fails on any offender outside
its list, never because an entry of the list has been fixed.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

import cartridge_runtime

PACKAGE = Path(cartridge_runtime.__file__).resolve().parent

#: Public names still bound to two objects: name -> the modules whose ``__all__`` hold the
#: second object (to be renamed there). Empty: keep it so.
DUPLICATE_NAMES_ALLOWED: dict[str, frozenset[str]] = {}


def _public_modules() -> list[str]:
    """The package and every module of it whose dotted path has no ``_`` component (the ray
    placement imports ray only when used)."""
    names = ["cartridge_runtime"]
    for info in pkgutil.walk_packages(cartridge_runtime.__path__, "cartridge_runtime."):
        parts = info.name.split(".")[1:]
        if not any(part.startswith("_") for part in parts):
            names.append(info.name)
    return names


def _definitions() -> dict[str, dict[int, list[str]]]:
    """Public name -> id of the object it is bound to -> the modules that export it so."""
    found: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name in _public_modules():
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            found[attr][id(getattr(module, attr))].append(name)
    return found


def test_every_public_name_means_one_object() -> None:
    clashes: dict[str, frozenset[str]] = {}
    for attr, objects in _definitions().items():
        if len(objects) > 1:
            groups = sorted(objects.values(), key=len)
            clashes[attr] = frozenset(m for group in groups[:-1] for m in group)
    unexpected = {
        name: modules
        for name, modules in clashes.items()
        if not modules <= DUPLICATE_NAMES_ALLOWED.get(name, frozenset())
    }
    assert unexpected == {}


def _imports(path: Path, module: str, modules: Collection[str]) -> set[str]:
    """Every module ``path`` imports, at module level, under TYPE_CHECKING or in a function
    (``from pkg import sub`` loads ``pkg.sub``; ``from pkg import name`` needs ``pkg``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                full = f"{base}.{node.module}" if node.module else base
            else:
                full = node.module or ""
            for alias in node.names:
                sub = f"{full}.{alias.name}"
                out.add(sub if sub in modules else full)
    return out


def _module_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _circles() -> list[frozenset[str]]:
    files = _module_files()
    graph = {
        module: {
            target
            for target in _imports(path, module, files)
            if target in files and target != module
        }
        for module, path in files.items()
    }
    # Two modules are in one circle when each reaches the other.
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            here = todo.pop()
            if here not in seen:
                seen.add(here)
                todo.extend(graph[here])
        reach[start] = seen
    circles = {
        frozenset({m} | {n for n in reach[m] if m in reach[n]})
        for m in graph
        if any(m in reach[n] for n in reach[m])
    }
    return sorted(circles, key=sorted)


#: None left: keep it that way.
CIRCLES_ALLOWED: frozenset[frozenset[str]] = frozenset()


def test_no_two_modules_import_each_other() -> None:
    assert [circle for circle in _circles() if circle not in CIRCLES_ALLOWED] == []


# -- error codes and attribution classes are named by their enums ------------------------------

#: None left: keep it that way.
LITERALS_ALLOWED: frozenset[str] = frozenset()
#: Where the words are defined.
ENUM_MODULE = "_report.py"


def _docstring_nodes(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _names_attribution(node: ast.AST) -> bool:
    """Whether an expression reads or names an attribution class (``x.attribution_class``,
    ``cls``, a call with ``attribution`` in its name)."""
    text = ast.unparse(node)
    return "attribution" in text or text == "cls"


def _class_positions(tree: ast.Module) -> set[int]:
    """The nodes that stand where an attribution class goes: the value of an
    ``attribution_class=`` / ``cls=`` argument or assignment, a parameter default of that name,
    the value of an ``"attribution_class"`` key, a side of a comparison with one, an argument
    of ``err`` / ``log`` / ``CallError`` / ``OpError`` after the first, the fallback of an
    ``or``."""
    spots: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("attribution_class", "cls"):
            spots.add(id(node.value))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(_names_attribution(t) for t in targets):
                spots.add(id(node.value))
        elif isinstance(node, ast.arguments):
            positional = node.posonlyargs + node.args
            with_defaults = positional[len(positional) - len(node.defaults) :]
            pairs = list(zip(with_defaults, node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d]
            spots.update(id(d) for a, d in pairs if "attribution" in a.arg or a.arg == "cls")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "attribution_class":
                    spots.add(id(value))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_attribution(side) for side in sides):
                for side in sides:
                    spots.add(id(side))
                    if isinstance(side, (ast.Tuple, ast.Set, ast.List)):
                        spots.update(id(e) for e in side.elts)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("err", "log", "CallError", "OpError"):
                spots.update(id(arg) for arg in node.args[1:])
        elif (
            isinstance(node, ast.BoolOp)
            and isinstance(node.op, ast.Or)
            and any(_names_attribution(v) for v in node.values[:-1])
        ):
            spots.add(id(node.values[-1]))
    return spots


def literal_words(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal that spells an :class:`ErrorCode` anywhere, or an
    :class:`AttributionClass` where an attribution class goes (docstrings aside)."""
    from cartridge_runtime.protocol import AttributionClass, ErrorCode

    codes = {c.value for c in ErrorCode}
    classes = {c.value for c in AttributionClass}
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    spots = _class_positions(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings:
                continue
            if node.value in codes or (node.value in classes and id(node) in spots):
                found.append((node.lineno, node.value))
    return sorted(found)


def test_the_scan_finds_literal_codes_and_classes() -> None:
    source = '''
def f(attribution_class: str = "internal", cls=None):
    """A docstring may say HANDLER_ERROR and internal."""
    err(rid, "CANCELLED", "text", "user")
    x = {"code": "TIMEOUT", "attribution_class": "resource"}
    if report.attribution_class == "input" or meta.get("attribution_class") or "environment":
        return OpError("MY_CODE", "internal error", attribution_class="user")
    return "input"  # a plain word elsewhere is not a class
'''
    assert literal_words(source) == [
        (2, "internal"),
        (4, "CANCELLED"),
        (4, "user"),
        (5, "TIMEOUT"),
        (5, "resource"),
        (6, "environment"),
        (6, "input"),
        (7, "user"),
    ]


def test_codes_and_classes_are_named_by_their_enums() -> None:
    offenders: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == ENUM_MODULE:
            continue
        found = literal_words(path.read_text(encoding="utf-8"))
        if found and rel not in LITERALS_ALLOWED:
            offenders[rel] = found
    assert offenders == {}


# -- every document cited is in the repository ------------------------------------------------

ROOT = PACKAGE.parent
#: None left: keep it that way.
CITATIONS_ALLOWED: frozenset[str] = frozenset()

#: Names of documents that are not in the repository (the protocol's rules are cited by their
#: ids in ``protocol_spec/`` instead).
FOREIGN_DOCUMENT = re.compile(
    r"fact[- ]sheet|urn[- ]semantics|bifaci-v6-facts|DEVELOPERS\.md|\.\./shared/|/work/"
    r"|steering repositor|spec §",
    re.IGNORECASE,
)
#: A section sign must follow the chapter it is a section of (``01-framing.md §1.6``).
SECTION = re.compile(r"§")
CHAPTER_BEFORE = re.compile(r"\b\d\d-[a-z-]+\.md`?\)?\s*§")
#: A relative Markdown link target, and a path into the repository's documentation.
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)")
DOC_PATH = re.compile(r"\b((?:protocol_spec|docs|benchmarks)/[\w./-]+\.(?:md|json|jsonl))\b")


def _cited_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "protocol_spec").rglob("*.md"))
    files += sorted((ROOT / "benchmarks").glob("*.md"))
    for folder in ("cartridge_runtime", "examples", "cartridges", "benchmarks", "tests"):
        files += sorted((ROOT / folder).rglob("*.py"))
    files += sorted((ROOT / "cartridge_runtime" / "templates").glob("*.tmpl"))
    return [f for f in files if f.name != Path(__file__).name and ".venv" not in f.parts]


def _citation_problems(path: Path, text: str) -> list[str]:
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path.relative_to(ROOT)}:{number}"
        match = FOREIGN_DOCUMENT.search(line)
        if match:
            problems.append(f"{where}: cites {match.group(0)!r}")
        if SECTION.search(line) and not CHAPTER_BEFORE.search(line):
            problems.append(f"{where}: a § without the chapter it belongs to")
        targets = LINK.findall(line) if path.suffix == ".md" else []
        for target in targets:
            if not (path.parent / target).exists():
                problems.append(f"{where}: link to missing {target}")
        for cited in DOC_PATH.findall(line):
            if path.suffix == ".py" and not cited.startswith("protocol_spec/"):
                continue  # elsewhere in code, docs/x.md may be data (a path inside an archive)
            if not (ROOT / cited).exists() and not (path.parent / cited).exists():
                problems.append(f"{where}: names missing {cited}")
    return problems


def test_citations_name_only_documents_the_repository_holds() -> None:
    problems: list[str] = []
    for path in _cited_files():
        if path.relative_to(ROOT).as_posix() not in CITATIONS_ALLOWED:
            problems += _citation_problems(path, path.read_text(encoding="utf-8"))
    assert problems == []


def test_the_citation_check_catches_foreign_documents() -> None:
    fake = ROOT / "docs" / "x.md"
    text = (
        "see the fact sheet §4.7\n"
        "and [the guide](handler-guide.md) and [gone](nowhere.md)\n"
        "per 05-flow-control.md §5.4 and `protocol_spec/99-none.md`\n"
        "facts in ../shared/spec/x.md\n"
    )
    assert _citation_problems(fake, text) == [
        "docs/x.md:1: cites 'fact sheet'",
        "docs/x.md:1: a § without the chapter it belongs to",
        "docs/x.md:2: link to missing nowhere.md",
        "docs/x.md:3: names missing protocol_spec/99-none.md",
        "docs/x.md:4: cites '../shared/'",
    ]
