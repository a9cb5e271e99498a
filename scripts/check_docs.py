#!/usr/bin/env python3
"""Docs name only what exists: every file, Python name and C++ name that the docs and the source
comments cite must resolve in the repository. Run by scripts/test.sh; prints one line per broken
reference and exits 1 if there is any. Standard library only.

    python3 scripts/check_docs.py [repository root]

What is read:
  * docs/*.md and README.md: backticked spans (fenced blocks are commands and output) and the
    targets of relative links;
  * `//` comments of *.cpp / *.h files;
  * comments and docstrings of the *.py files under python/, scripts/, bench/ and tests/.
What is checked, decided by a name's first part (everything else is torch's, Kineto's, the
standard library's or prose, and is skipped):
  * paths: `a/b.cpp` or `a/` whose first folder is one of ours, or a bare `file.py` with a source
    extension, must be a tracked file or folder (a path may be cited from any folder down, as
    `fqntrace/_exit.py`; `*` globs). A file the build writes (named in CMakeLists.txt, cmake/,
    pyproject.toml) counts as existing; a bare header the code includes as `<...>` is not ours;
  * Python names: `fqntrace.x.y`, `module.x` (a module of ours, by file name), `Class.x` (a class
    of ours outside tests/, whose model classes root the fqns prose shows, `Net.blocks.0`) must be
    a module, def, class or attribute found by parsing the sources with `ast`; a root such as
    `_Totals` (a private class) is always ours. `fqntrace._C.x` and names inside the C++
    extension modules are looked up as C++ names;
  * C++ names: `ns::x`, `Class::x` whose first part is a namespace, class or struct of ours: every
    later part must be an identifier of the C++ code (comments left out, strings kept, so the
    binding's method names count);
  * tests: GoogleTest's and ctest's `Suite.Name`, pytest's `tests/python/test_x.py::test_y`;
  * a Markdown link's target, from the page that links.
Bare identifiers (`set_process_group`) are not checked: write `_C.set_process_group` to have it
held. A data key written like a name whose root is one of our modules (`steps.kept`) reads as a
reference: write it `kept` in `steps`.
"""

import ast
import fnmatch
import os
import re
import subprocess
import sys
import tokenize

# Bare file names (no folder) with these extensions are ours to check; others (trace.json,
# run.jsonl) are outputs the docs describe.
SOURCE_EXTENSIONS = {"py", "cpp", "h", "cc", "hpp", "md", "sh", "cmake", "toml"}
# Any of these ends a name that is a file, never a Python attribute (`results.json`).
FILE_EXTENSIONS = SOURCE_EXTENSIONS | {
    "json",
    "jsonl",
    "gz",
    "txt",
    "so",
    "pth",
    "png",
    "csv",
    "yml",
    "yaml",
    "cfg",
    "ini",
    "in",
    "c",
    "js",
    "log",
}
PYTHON_FOLDERS = ("python/", "scripts/", "bench/", "tests/")
# Namespaces our C++ reopens or declares against (op registration, std specializations): never ours.
FOREIGN_CXX_ROOTS = {
    "std",
    "at",
    "c10",
    "c10d",
    "torch",
    "caffe2",
    "pybind11",
    "py",
    "simdjson",
    "libkineto",
    "detail",
}
SKIPPED_DIRS = {".git", "build", ".venv", "__pycache__", "node_modules"}
BUILD_FILES = ("CMakeLists.txt", ".cmake", "pyproject.toml")
LINK_MARK = "\0link:"  # before a Markdown link's target among the tokens: resolved from its page
SELF = "scripts/check_docs.py"  # its docstring's names are examples of the forms it checks

# Splits prose into candidate tokens; `{}`/`<>` stay inside a token so placeholders can be told.
TOKEN_SPLIT = re.compile(r"[\s()\[\],;'\"=`|]+")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
SCOPED = re.compile(r"[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)+")
WORD = re.compile(r"[A-Za-z_]\w*")
CXX_ROOT_DECL = re.compile(
    r"\b(?:namespace|class|struct|union|enum(?:\s+class)?)\s+(\w+(?:::\w+)*)"
)
SYSTEM_INCLUDE = re.compile(r"#\s*include\s*<([^>]+)>")
EXTENSION_MODULE = re.compile(r"\bPyInit_(\w+)")
GTEST = re.compile(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)")
CTEST = re.compile(r"add_test\(\s*NAME\s+(\w+)\.(\w+)")
PRIVATE_CLASS = re.compile(r"_[A-Z]\w*[a-z]\w*")  # `_Totals`: a private class is always one of ours


class Broken(Exception):
    """A reference that does not resolve; the message says where the lookup stopped."""


def tracked_files(root):
    """Tracked paths (posix, relative to root); a tree that is not a git work tree is walked."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
        files = [p for p in out.stdout.decode().split("\0") if p]
        if files:
            return [p for p in files if os.path.exists(os.path.join(root, p))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        rel = os.path.relpath(folder, root)
        files += [n if rel == "." else f"{rel}/{n}".replace(os.sep, "/") for n in names]
    return files


# What a C++ file holds besides code: comments, raw strings and strings (kept, for names the
# binding registers as strings), found in one pass so that `//` inside a string is no comment.
# A quote after a digit is a digit separator (3'217'000), not a character literal.
CXX_LEXEMES = re.compile(
    r"""//[^\n]*|/\*.*?\*/|(?<!\w)R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|(?<!\w)'(?:\\.|[^'\\\n])*'""",
    re.S,
)


def strip_cxx(text):
    """(code with comments blanked, [(line, `//` comment text)]); strings and raw strings kept."""
    code, comments = [], []
    last, line = 0, 1
    for match in CXX_LEXEMES.finditer(text):
        lexeme = match.group(0)
        line += text.count("\n", last, match.start())
        if lexeme.startswith("//"):
            comments.append((line, lexeme[2:]))
            code.append(text[last : match.start()])
        elif lexeme.startswith("/*"):
            code.append(text[last : match.start()] + "\n" * lexeme.count("\n"))
        else:
            code.append(text[last : match.end()])
        line += lexeme.count("\n")
        last = match.end()
    code.append(text[last:])
    return "".join(code), comments


class ParsedModule:
    """A parsed Python file: its top-level names, and for each class its attributes."""

    def __init__(self, path, dotted, tree, submodules=()):
        self.path = path
        self.dotted = dotted  # "fqntrace.analysis.top" under python/, else None
        self.names = {}  # name -> ast node (ClassDef, FunctionDef, alias, or a value's target)
        self.submodules = set(submodules)
        self._collect(tree.body)
        for node in tree.body:  # a module-level __getattr__ exports the names it tests for
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        self.names.setdefault(sub.value, sub)

    def _collect(self, body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.names[node.name] = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    self.names[(alias.asname or alias.name).split(".")[0]] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.names[name.id] = node
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                self._collect(node.body)
                for extra in (getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                    self._collect(extra)
                for handler in getattr(node, "handlers", []):
                    self._collect(handler.body)


def class_attributes(cls):
    """A class's methods, class-level names (fields, `__slots__`) and the `self.x` it assigns."""
    names = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names[target.id] = node
                    if target.id == "__slots__":
                        for const in ast.walk(node.value):
                            if isinstance(const, ast.Constant) and isinstance(const.value, str):
                                names[const.value] = node
    for node in ast.walk(cls):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id in ("self", "cls")
                ):
                    names.setdefault(sub.attr, node)
    return names


class Repository:
    """What exists: tracked files and folders, Python modules and classes, C++ identifiers."""

    def __init__(self, root):
        self.root = root
        self.files = tracked_files(root)
        self.file_set = set(self.files)
        self.dirs = {os.path.dirname(p) for p in self.files}
        for d in list(self.dirs):
            while d:
                d = os.path.dirname(d)
                self.dirs.add(d)
        self.dirs.discard("")
        self.dir_names = {p.rsplit("/", 1)[-1] for p in self.dirs}
        self.basenames = {p.rsplit("/", 1)[-1] for p in self.files}
        self._texts, self._trees = {}, {}
        # Files the build writes (`_build_info.py`) exist once built: named in the build's files.
        self.build_products = set()
        for path in self.files:
            if path.endswith(BUILD_FILES):
                self.build_products.update(re.findall(r"[\w.+-]+\.\w+", self.text(path)))
        self._index_python()
        self._index_cxx()

    def text(self, path):
        """A tracked file's text, read once (the index and the references both read it)."""
        if path not in self._texts:
            with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                self._texts[path] = f.read()
        return self._texts[path]

    def tree(self, path):
        """A Python file's syntax tree, parsed once; None when it does not parse."""
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self.text(path), path)
            except SyntaxError:
                self._trees[path] = None
        return self._trees[path]

    def _index_python(self):
        self.modules = {}  # dotted name under python/ ("fqntrace.analysis.top") -> ParsedModule
        self.by_stem = {}  # file stem, or package name for __init__.py -> [ParsedModule]
        self.classes = {}  # class name -> [(ParsedModule, ClassDef)]
        self.by_path = {}  # tracked path -> ParsedModule
        for path in self.files:
            if not path.endswith(".py") or not path.startswith(PYTHON_FOLDERS):
                continue
            tree = self.tree(path)
            if tree is None:
                continue
            folder, name = os.path.split(path)
            stem = os.path.basename(folder) if name == "__init__.py" else name[:-3]
            submodules = ()
            if name == "__init__.py":
                submodules = {
                    p[len(folder) + 1 :].split("/")[0].removesuffix(".py")
                    for p in self.files
                    if p.startswith(folder + "/")
                    and (p.endswith(".py") or "/" in p[len(folder) + 1 :])
                }
            dotted = None
            if path.startswith("python/"):
                dotted = path[len("python/") : -3].replace("/", ".").removesuffix(".__init__")
            module = ParsedModule(path, dotted, tree, submodules)
            self.by_path[path] = module
            self.by_stem.setdefault(stem, []).append(module)
            if dotted:
                self.modules[dotted] = module
            if path.startswith("tests/"):
                continue  # the tests' model classes (`Net`, `Model`) are the roots of fqns in prose
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, []).append((module, node))

    def _index_cxx(self):
        self.cxx_words, self.cxx_roots = set(), set()
        self.system_headers, self.extension_modules = set(), set()
        self.cxx_comments = {}  # path -> [(line, text)]
        for path in self.files:
            if not path.endswith((".cpp", ".h", ".cc", ".hpp")):
                continue
            code, comments = strip_cxx(self.text(path))
            self.cxx_comments[path] = comments
            self.cxx_words.update(WORD.findall(code))
            for decl in CXX_ROOT_DECL.findall(code):
                self.cxx_roots.update(decl.split("::"))
            self.system_headers.update(h.rsplit("/", 1)[-1] for h in SYSTEM_INCLUDE.findall(code))
            self.extension_modules.update(EXTENSION_MODULE.findall(code))
        self.cxx_roots -= FOREIGN_CXX_ROOTS
        # GoogleTest's `Suite.Name`, as docs cite tests (and ctest's own names for the scripts).
        self.gtests = set()
        for path in self.files:
            if path.endswith((".cpp", ".h")):
                self.gtests.update(GTEST.findall(self.text(path)))
            elif path.endswith("CMakeLists.txt"):
                self.gtests.update(CTEST.findall(self.text(path)))
        self.gtest_suites = {suite for suite, _ in self.gtests}

    # -- resolution: each returns None when the name is not ours, True when it resolves, and
    # raises Broken when it is ours and does not.

    def resolve_path(self, token, citing_file):
        token = token.rstrip(".:")
        if token.startswith("./"):
            token = token[2:]
        if not token or token.startswith(("/", "~", "$", "-")) or any(c in token for c in "<>{}"):
            return None
        if token.rsplit("/", 1)[-1] in self.build_products:
            return True
        if "/" not in token:
            if (
                token.startswith(".")
                or token.rsplit(".", 1)[-1] not in SOURCE_EXTENSIONS
                or token in self.system_headers
            ):
                return None  # `.json.gz` is an extension; `Python.h` is the system's
            if any(fnmatch.fnmatchcase(b, token) for b in self.basenames):
                return True
            raise Broken("no tracked file of that name")
        folder_cited = token.endswith("/")
        token = token.rstrip("/")
        if token.split("/")[0] not in self.dir_names | {"..", "."}:
            return None
        relative = os.path.normpath(os.path.join(os.path.dirname(citing_file), token))
        relative = relative.replace(os.sep, "/")
        candidates = self.dirs if folder_cited else self.file_set | self.dirs
        for path in candidates:
            if (
                fnmatch.fnmatchcase(path, token)
                or fnmatch.fnmatchcase(path, "*/" + token)
                or path == relative
            ):
                return True
        kind = "folder" if folder_cited else "file or folder"
        raise Broken(f"no tracked {kind} at that path")

    def resolve_cxx(self, parts):
        if parts[0] not in self.cxx_roots:
            return None
        return self.cxx_identifiers(parts[1:])

    def cxx_identifiers(self, parts):
        missing = [p for p in parts if p not in self.cxx_words]
        if missing:
            raise Broken(f"no C++ identifier '{missing[0]}' in the sources")
        return True

    def resolve_link(self, target, citing_file):
        """A Markdown link's target, relative to the page that links."""
        path = os.path.normpath(os.path.join(os.path.dirname(citing_file), target))
        path = path.replace(os.sep, "/")
        if path in self.file_set or path.rstrip("/") in self.dirs:
            return True
        raise Broken(f"no tracked file or folder {path}")

    def resolve_node_id(self, file_part, names, citing_file):
        """A pytest node id, `tests/python/test_x.py::test_y`: the file, then the test in it."""
        self.resolve_path(file_part, citing_file)
        module = next(
            (m for p, m in self.by_path.items() if p == file_part or p.endswith("/" + file_part)),
            None,
        )
        if module is not None:
            self._walk(module, [n.split("[")[0] for n in names], module)
        return True

    def resolve_python(self, parts):
        root = parts[0]
        if root in self.gtest_suites and len(parts) == 2:
            if tuple(parts) in self.gtests:
                return True
            raise Broken(f"no test {parts[1]} in suite {root}")
        if root == "fqntrace" and "fqntrace" in self.modules:
            starts = [self.modules["fqntrace"]]
        elif root in self.by_stem:
            starts = self.by_stem[root]
        elif root in self.classes:
            return self._first_resolving([(cls, parts[1:], m) for m, cls in self.classes[root]])
        elif root in self.extension_modules:
            return self.cxx_identifiers(parts[1:])
        elif PRIVATE_CLASS.fullmatch(root):
            raise Broken(f"no class {root} in the Python sources")
        else:
            return None
        return self._first_resolving([(m, parts[1:], m) for m in starts])

    def _first_resolving(self, starts):
        first_error = None
        for scope, rest, module in starts:
            try:
                return self._walk(scope, rest, module)
            except Broken as e:
                first_error = first_error or e
        raise first_error

    def _walk(self, scope, rest, module):
        """Looks the parts in `rest` up from `scope` (a ParsedModule, or a ClassDef in `module`)."""
        for i, part in enumerate(rest):
            where = module.path
            if isinstance(scope, ParsedModule):
                if part in scope.submodules and f"{scope.dotted}.{part}" in self.modules:
                    scope = module = self.modules[f"{scope.dotted}.{part}"]
                    continue
                node = scope.names.get(part)
                if node is None and part in scope.submodules:
                    return True  # a folder of data or a module the index could not read
                if node is None and part in self.extension_modules:  # _C, _native_summary
                    return self.cxx_identifiers(rest[i + 1 :])
                if node is None and part + ".py" in self.build_products:
                    return True
                if node is None:
                    raise Broken(f"no '{part}' in {where}")
            elif isinstance(scope, ast.ClassDef):
                node = class_attributes(scope).get(part)
                if node is None:
                    raise Broken(f"no '{part}' in class {scope.name} ({where})")
            else:
                raise Broken(f"'{rest[i - 1]}' in {where} is not a module or class")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                return self._follow_import(node, part, rest[i + 1 :], module)
            scope = node
        return True

    def _follow_import(self, node, name, rest, module):
        if not rest:
            return True
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.path[len("python/") :].split("/")[: -node.level]
                base = ".".join(package + ([base] if base else []))
            target = next((a.name for a in node.names if (a.asname or a.name) == name), name)
            if f"{base}.{target}" in self.modules:
                found = self.modules[f"{base}.{target}"]
                return self._walk(found, rest, found)
            if base in self.modules:
                return self._walk(self.modules[base], [target] + rest, self.modules[base])
        return None  # imported from outside: not ours to check


def candidates(text):
    """The tokens of a piece of prose that may be references, trailing punctuation removed."""
    for raw in TOKEN_SPLIT.split(text):
        token = raw.strip(".,:;!?").lstrip("#@*")
        if "/" not in token:
            token = token.rstrip("*")  # `c10d::*`; a path keeps its glob (`analysis/engine_*`)
        if token:
            yield token


def check_token(repo, token, citing_file):
    """None (not ours, or resolves) or the reason the reference is broken."""
    try:
        if token.startswith(LINK_MARK):
            repo.resolve_link(token[len(LINK_MARK) :], citing_file)
            return None
        if "::" in token:
            parts = token.split("::")
            if parts[0].endswith(".py"):  # a pytest node id
                repo.resolve_node_id(parts[0], parts[1:], citing_file)
            elif SCOPED.fullmatch(token.rstrip(":*")):
                repo.resolve_cxx(token.rstrip(":*").replace("~", "").split("::"))
            return None
        last = token.rsplit("/", 1)[-1]
        if "/" in token or ("." in last and last.rsplit(".", 1)[-1] in FILE_EXTENSIONS):
            repo.resolve_path(token, citing_file)
        elif DOTTED.fullmatch(token):
            repo.resolve_python(token.split("."))
    except Broken as e:
        return str(e)
    return None


def markdown_references(path, text):
    """(line, token) of the backticked spans, and (line, LINK_MARK + target) of relative links;
    fenced blocks left out."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in CODE_SPAN.finditer(line):
            for token in candidates(match.group(2)):
                yield number, token
        for target in LINK.findall(line):
            target = target.split("#", 1)[0]
            if target and "://" not in target and not target.startswith("mailto:"):
                yield number, LINK_MARK + target


def python_references(text, tree):
    """(line, token) of a Python file's comments and docstrings."""
    if tree is None:
        return
    lines = text.splitlines(True)
    for tok in tokenize.generate_tokens(iter(lines).__next__):
        if tok.type == tokenize.COMMENT:
            for token in candidates(tok.string[1:]):
                yield tok.start[0], token
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                first = body[0].value.lineno
                for offset, line in enumerate(body[0].value.value.splitlines()):
                    for token in candidates(line):
                        yield first + offset, token


def references(repo):
    """(file, line, token) of every place the checker reads."""
    for path in repo.files:
        if path == "README.md" or (
            path.startswith("docs/") and path.count("/") == 1 and path.endswith(".md")
        ):
            for line, token in markdown_references(path, repo.text(path)):
                yield path, line, token
        elif path.endswith(".py") and path.startswith(PYTHON_FOLDERS) and path != SELF:
            for line, token in python_references(repo.text(path), repo.tree(path)):
                yield path, line, token
        elif path in repo.cxx_comments:
            for line, comment in repo.cxx_comments[path]:
                for token in candidates(comment):
                    yield path, line, token


def main(argv):
    default_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(argv[1] if len(argv) > 1 else default_root)
    repo = Repository(root)
    broken = {}
    for path, line, token in references(repo):
        reason = check_token(repo, token, path)
        if reason:
            broken[(path, line, token.removeprefix(LINK_MARK))] = reason
    for (path, line, token), reason in sorted(broken.items()):
        print(f"{path}:{line}: '{token}' does not resolve ({reason})")
    if broken:
        print(
            f"check_docs: {len(broken)} broken reference(s); fix the doc or comment, or the name"
            " it cites (a data key written like a name, `steps.kept`, is written `kept` in"
            " `steps`)"
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
