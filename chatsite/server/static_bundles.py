"""The chat page's scripts as two files instead of one request per module.

A page that loads an ES module waits for every module it imports, one request each, before
it runs. The chat page's first paint needs the conversation list (``js/chat_start.js`` and
what it imports), the rest of the page (``js/chat.js``) is loaded when first needed
(``docs/performance.md#first-load``). Each is served as one file, made here from the
modules as written: every module becomes a function run once, in the order the imports ask,
whose exports its importers read. A module already in an earlier bundle is taken from it
(the later bundle imports the earlier one by its plain URL, so both share one copy, as
unbundled modules would). ``import("./x.js")`` of another bundle's entry names the bundle;
other dynamic imports (the renderers) stay separate modules.

``BundleFinder`` is a staticfiles finder: ``collectstatic`` collects the bundles like any
file, and with ``DEBUG`` they are made again when a module changes. Only the forms the
project's modules use are understood (named imports of ``./name.js``, bare imports, and
``export`` before a ``function``, ``class`` or ``const``); anything else is an error naming
the module, so a bundle never silently differs from the modules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

# Bundle file (under static/) -> its entry module; a later bundle takes what an earlier has.
BUNDLES = {
    "js/chat_start.bundle.js": "js/chat_start.js",
    "js/chat.bundle.js": "js/chat.js",
}

_NAMED_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w-]+)\.js";[ \t]*$', re.M)
_BARE_IMPORT = re.compile(r'^import\s*"\./([\w-]+)\.js";[ \t]*$', re.M)
_ANY_IMPORT = re.compile(r"^import\b(?!\()", re.M)
_EXPORT = re.compile(r"^export\s+((?:async\s+)?function\*?|class|const)\s+(\w+)", re.M)
_ANY_EXPORT = re.compile(r"^export\b", re.M)
_DYNAMIC_IMPORT = re.compile(r'\bimport\("\./([\w-]+)\.js"\)')
# A line that is only a comment. The modules explain themselves at length; the page that
# loads a bundle does not need the explanations (the modules keep them).
_COMMENT_LINE = re.compile(r"^[ \t]*//[^\n]*\n", re.M)


class BundleError(ValueError):
    """A module uses a form the bundler does not understand, or the imports go round."""


def _variable(module: str) -> str:
    return "__module_" + re.sub(r"\W", "_", module)


class _Module:
    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.imports: list[tuple[str, str]] = []  # (module, specifiers or "")
        for match in _NAMED_IMPORT.finditer(source):
            self.imports.append((match.group(2), match.group(1)))
        for match in _BARE_IMPORT.finditer(source):
            self.imports.append((match.group(1), ""))
        understood = len(_NAMED_IMPORT.findall(source)) + len(_BARE_IMPORT.findall(source))
        if len(_ANY_IMPORT.findall(source)) != understood:
            raise BundleError(f'{name}.js: only `import {{ … }} from "./x.js";` is bundled')
        self.exports = [match.group(2) for match in _EXPORT.finditer(source)]
        if len(_ANY_EXPORT.findall(source)) != len(self.exports):
            raise BundleError(f"{name}.js: only `export function|class|const name` is bundled")

    def body(self, entries: dict[str, str]) -> str:
        def named(match: re.Match[str]) -> str:
            names = [part.strip() for part in match.group(1).split(",") if part.strip()]
            fields = ", ".join(part.replace(" as ", ": ") for part in names)
            return f"const {{ {fields} }} = {_variable(match.group(2))};"

        def dynamic(match: re.Match[str]) -> str:
            bundle = entries.get(match.group(1))
            return f'import("./{bundle}")' if bundle else match.group(0)

        text = _NAMED_IMPORT.sub(named, self.source)
        text = _BARE_IMPORT.sub("", text)
        text = _ANY_EXPORT.sub("", text)
        if not _may_span_lines(text):
            text = _COMMENT_LINE.sub("", text)
        return _DYNAMIC_IMPORT.sub(dynamic, text)


def _may_span_lines(source: str) -> bool:
    """Whether a template literal may run over several lines: a line with an odd number of
    backticks. Within one, a line that looks like a comment is text, so none is removed."""
    return any(line.count("`") % 2 for line in source.splitlines())


def _ordered(entry: str, read: Any, outside: set[str]) -> list[_Module]:
    """The modules ``entry`` needs, each after what it imports (as the browser runs them)."""
    order: list[_Module] = []
    done: set[str] = set()
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in done or name in outside:
            return
        if name in visiting:
            raise BundleError("imports go round: " + " -> ".join([*visiting, name]))
        visiting.append(name)
        module = _Module(name, read(name))
        for imported, _ in module.imports:
            visit(imported)
        visiting.pop()
        done.add(name)
        order.append(module)

    visit(entry)
    return order


def build_bundles(js_dir: Path, bundles: dict[str, str] = BUNDLES) -> dict[str, str]:
    """Every bundle's text, from the modules in ``js_dir`` (static/js)."""

    def read(name: str) -> str:
        path = js_dir / f"{name}.js"
        if not path.is_file():
            raise BundleError(f"{name}.js is imported but is not in {js_dir}")
        return path.read_text(encoding="utf-8")

    entries = {Path(entry).stem: Path(bundle).name for bundle, entry in bundles.items()}
    bundled: dict[str, str] = {}  # module -> the bundle file that has it
    texts: dict[str, str] = {}
    for bundle, entry in bundles.items():
        modules = _ordered(Path(entry).stem, read, set(bundled))
        lines = [
            "// Made by chatsite/server/static_bundles.py from the modules in static/js:",
            "// edit those, not this.",
        ]
        wanted = {imported for module in modules for imported, _ in module.imports}
        for earlier in sorted({bundled[name] for name in wanted if name in bundled}):
            names = sorted(_variable(n) for n in wanted if bundled.get(n) == earlier)
            lines.append(f'import {{ {", ".join(names)} }} from "./{earlier}";')
        for module in modules:
            if module.name in entries and module.name != Path(entry).stem:
                raise BundleError(f"{module.name}.js is another bundle's entry: import() it")
            exports = ", ".join(module.exports)
            lines.append(f"\n// ---- {module.name}.js")
            lines.append(f"const {_variable(module.name)} = (() => {{")
            lines.append(module.body(entries).strip("\n"))
            lines.append(f"return {{ {exports} }};\n}})();")
            bundled[module.name] = Path(bundle).name
        lines.append(f"\nexport {{ {', '.join(_variable(m.name) for m in modules)} }};\n")
        texts[bundle] = "\n".join(lines)
    return texts


class BundleFinder(BaseFinder):
    """Serves and collects the bundles, made into ``VAR_DIR/bundles`` when a module changed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.root = Path(settings.VAR_DIR) / "bundles"
        self.storage = FileSystemStorage(location=str(self.root))
        self._made_from: tuple[tuple[str, float], ...] | None = None

    def _js_dir(self) -> Path:
        return Path(settings.BASE_DIR) / "static" / "js"

    def _make(self) -> None:
        sources = tuple(
            sorted((path.name, path.stat().st_mtime) for path in self._js_dir().glob("*.js"))
        )
        if sources == self._made_from:
            return
        for name, text in build_bundles(self._js_dir()).items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                # Whole or not at all: another process may be serving the file meanwhile.
                partial = path.with_name(f".{path.name}.{os.getpid()}")
                partial.write_text(text, encoding="utf-8")
                partial.replace(path)
        self._made_from = sources

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        find_all = find_all or kwargs.get("all", False)
        if path not in BUNDLES:
            return [] if find_all else None
        self._make()
        found = str(self.root / path)
        return [found] if find_all else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        self._make()
        for path in BUNDLES:
            yield path, self.storage
