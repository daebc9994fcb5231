#!/usr/bin/env python3
"""CheckExports.py - libsinter.so exports Sinter's API and none of LLVM's, MLIR's or Abseil's code.

    python3 tests/package/CheckExports.py LIBSINTER SOURCE_DIR MAX_EXPORTS [NM]

Reads the defined dynamic symbols (`nm -D --defined-only`) with global, weak or unique binding and
sorts each into one of:
  C ABI     - sinter_* (include/sinter/sinter.h); every function the header declares must be there
  C++ API   - sinter::..., and the vtable and type information of sinter::ComputeBackend; the
              functions of include/sinter/*.h listed in CPP_API must be there
  TypeID    - MLIR's implicit TypeID statics and their guard variables, data objects that must be
              one copy with libMLIR.so's (backends/libsinter.map says why)
Fails on any other symbol (naming the LLVM (llvm::, LLVM*), MLIR (mlir::, mlir*) and Abseil ones),
on a missing API symbol, and when there are more than MAX_EXPORTS symbols in all (before the
version script libsinter.so exported 6,176; with it 150: 31 C ABI, 23 C++ API, 96 TypeID).
"""
import re
import subprocess
import sys

# The C++ API of include/sinter/ (demangled, up to the opening parenthesis or the whole name).
CPP_API = [
    "sinter::createBackend",
    "sinter::optionsFromEnvironment",
    "sinter::createBackendFromEnvironment",
    "sinter::resolveBackend",
    "sinter::backendKinds",
    "sinter::disabledFusionNames",
    "sinter::addDisabledFusions",
    "sinter::listDevices",
    "sinter::findDevice",
    "sinter::describeDevice",
    "sinter::deviceTypeName",
    "sinter::backendKindName",
    "sinter::ComputeBackend::~ComputeBackend",
    "vtable for sinter::ComputeBackend",
    "typeinfo for sinter::ComputeBackend",
    "sinter::lookupDType",
    "sinter::dtypeInfo",
    "sinter::dtypeName",
    "sinter::parseDType",
    "sinter::checkWeightDType",
]
TYPEID = re.compile(r"^_Z(GV)?ZN4mlir6detail14TypeIDResolver.*resolveTypeIDEvE2id$")
DATA_TYPES = set("BDGRSVu")  # nm's letters for data objects (V/u: weak or unique objects)


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def api_name(demangled):
    return demangled.split("(")[0].replace("[abi:cxx11]", "")


def main(lib, source, max_exports, nm="nm"):
    out = subprocess.run([nm, "-D", "--defined-only", "--format=posix", lib], capture_output=True,
                         text=True, check=True).stdout
    symbols = []  # (name, nm type) of the exported symbols
    local = 0
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        # GNU ld leaves a few symbols the version script made local in .dynsym with local binding
        # (nm's lower-case letters but u, v and w); the dynamic linker never binds to them.
        if fields[1].islower() and fields[1] not in "uvw":
            local += 1
            continue
        symbols.append((fields[0].split("@")[0], fields[1]))
    names = demangle([name for name, _ in symbols])
    with open(source + "/include/sinter/sinter.h") as f:
        c_abi = set(re.findall(r"^SINTER_API\b[^;]*?\b(sinter_\w+)\s*\(", f.read(), re.M))

    groups = {"C ABI": [], "C++ API": [], "TypeID": []}
    bad = []
    for name, kind in symbols:
        d = names[name]
        if name.startswith("sinter_"):
            groups["C ABI"].append(name)
        elif d.startswith("sinter::") or re.match(r"^(vtable|typeinfo|typeinfo name) for sinter::",
                                                  d):
            groups["C++ API"].append(d)
        elif TYPEID.match(name) and kind in DATA_TYPES:
            groups["TypeID"].append(d)
        else:
            bad.append((name, kind, d))

    failures = []
    for name, kind, d in bad:
        owner = "unexpected"
        if re.match(r"^(llvm::|LLVM)", d) or "llvm::" in d.split("(")[0]:
            owner = "LLVM"
        elif re.match(r"^(mlir::|mlir[A-Z])", d) or "mlir::" in d.split("(")[0]:
            owner = "MLIR"
        elif "absl::" in d.split("(")[0]:
            owner = "Abseil"
        failures.append("exported %s symbol (%s): %s" % (owner, kind, d))
    for want in sorted(c_abi - set(groups["C ABI"])):
        failures.append("C ABI function not exported: %s" % want)
    exported_api = {api_name(d) for d in groups["C++ API"]}
    for want in CPP_API:
        if want not in exported_api:
            failures.append("C++ API symbol not exported: %s" % want)
    if not c_abi:
        failures.append("found no SINTER_API function in include/sinter/sinter.h")
    total = len(symbols)
    if total > max_exports:
        failures.append("%d exported symbols, more than the bound %d" % (total, max_exports))

    print("%s: %d exported symbols (bound %d): %s; %d more in .dynsym with local binding" % (
        lib, total, max_exports,
        ", ".join("%d %s" % (len(v), k) for k, v in groups.items()) + ", %d other" % len(bad),
        local))
    for d in sorted(set(groups["C++ API"])):
        print("  C++ API: %s" % d)
    for line in failures[:200]:
        print("FAILED: " + line)
    if len(failures) > 200:
        print("FAILED: ... and %d more" % (len(failures) - 200))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:]))
