# lit.cfg.py - how lit runs the FileCheck tests under tests/lit (loaded by lit.site.cfg.py).
#
# Every `.mlir` and `.test` file below this folder is a test; RUN lines use `sinter-opt`,
# `sinter-dump`, `sinter-run`, `FileCheck` and `not`, which resolve to the build's tools (all in
# <build>/bin) and LLVM 19's.
# `%shared` is the ../shared folder; tests that read its model say `REQUIRES: shared-models`,
# and when the model is absent lit reports them UNSUPPORTED with the note printed below.
import os
import subprocess

import lit.formats

config.name = "Sinter"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sinter_obj_root, "tests", "lit")

# Tools by full path, so a stray sinter-opt or FileCheck on PATH is never used.
for tool, folder in [("sinter-opt", config.sinter_tools_dir),
                     ("sinter-dump", config.sinter_tools_dir),
                     ("sinter-run", config.sinter_tools_dir),
                     ("FileCheck", config.llvm_tools_dir),
                     ("not", config.llvm_tools_dir)]:
    path = os.path.join(folder, tool)
    if not os.path.exists(path) and not tool.startswith("sinter-"):
        lit_config.fatal("%s not found at %s" % (tool, path))
    config.substitutions.append((r"(?<![\w./-])" + tool + r"(?![\w.-])", path))

config.environment["PATH"] = os.pathsep.join(
    [config.sinter_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

config.substitutions.append(("%shared", config.sinter_shared_dir))
stories = os.path.join(config.sinter_shared_dir, "models", "stories260K.bin")
if os.path.exists(stories):
    config.available_features.add("shared-models")
else:
    lit_config.note("%s is absent: the tests that need it (REQUIRES: shared-models) are "
                    "UNSUPPORTED" % stories)

# `%tools` is the source tree's tools/ folder (its scripts).
config.substitutions.append(("%tools", os.path.join(config.sinter_src_root, "tools")))

# sinter-bench by full path too: in the tools folder where the commands build into <build>/bin,
# else in its own build folder.
sinter_bench = os.path.join(config.sinter_tools_dir, "sinter-bench")
if not os.path.exists(sinter_bench):
    sinter_bench = os.path.join(config.sinter_obj_root, "tools", "sinter-bench", "sinter-bench")
config.substitutions.append((r"(?<![\w./-])sinter-bench(?![\w.-])", sinter_bench))

# `REQUIRES: lavapipe`: tests that expect Mesa's software Vulkan device in sinter-run's list.
sinter_run = os.path.join(config.sinter_tools_dir, "sinter-run")
try:
    listed = subprocess.run([sinter_run, "--list-devices"], capture_output=True, text=True,
                            timeout=60).stdout
except (OSError, subprocess.SubprocessError):
    listed = ""
if "llvmpipe" in listed:
    config.available_features.add("lavapipe")
else:
    lit_config.note("no lavapipe device in `sinter-run --list-devices`: the tests that need it "
                    "(REQUIRES: lavapipe) are UNSUPPORTED")

# `REQUIRES: graphviz`: tests that look at the .svg sinter-dump --dot makes with Graphviz `dot`.
import shutil
if shutil.which("dot"):
    config.available_features.add("graphviz")
else:
    lit_config.note("Graphviz `dot` is not on PATH: the tests that need it (REQUIRES: graphviz) "
                    "are UNSUPPORTED")
