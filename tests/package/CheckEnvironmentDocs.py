#!/usr/bin/env python3
"""CheckEnvironmentDocs.py - every SINTER_* environment variable the sources read is documented.

    python3 tests/package/CheckEnvironmentDocs.py SOURCE_DIR

Collects each string literal that is a SINTER_* name (the form getenv/setenv calls use) in the C, C++,
Rust and Python sources and each ${SINTER_NAME...} / $SINTER_NAME in the shell scripts, and fails naming
every one that docs/ENVIRONMENT.md does not list as `SINTER_NAME`.
"""
import os
import re
import sys

LITERAL = re.compile(r'"(SINTER_[A-Z0-9_]+)"')
SHELL = re.compile(r'\$\{?(SINTER_[A-Z0-9_]+)')
SKIP = {"build", ".git", "target"}


def main(root):
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP and not d.startswith("build")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if name.endswith((".cpp", ".h", ".c", ".rs", ".py")):
                pattern = LITERAL
            elif name.endswith(".sh"):
                pattern = SHELL
            else:
                continue
            with open(path, errors="replace") as f:
                for var in pattern.findall(f.read()):
                    found.setdefault(var, os.path.relpath(path, root))
    with open(os.path.join(root, "docs", "ENVIRONMENT.md")) as f:
        doc = f.read()
    missing = sorted(v for v in found if "`%s" % v not in doc)
    for v in missing:
        print("docs/ENVIRONMENT.md does not document %s (read in %s)" % (v, found[v]))
    if not missing:
        print("docs/ENVIRONMENT.md documents all %d variables: %s" % (len(found),
                                                                     " ".join(sorted(found))))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
