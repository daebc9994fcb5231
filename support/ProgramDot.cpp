// ProgramDot.cpp - Graphviz output of a kernel program.
//
// Edges follow slots: an op that reads slot s depends on the last earlier op that wrote s. That
// is exactly the order the executors keep, so the picture shows the real dependencies.
#include "support/ProgramDot.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace sinter {
namespace {

std::string escape(const std::string &s) { return absl::StrReplaceAll(s, {{"\"", "\\\""}}); }

} // namespace

std::string programToDot(const KernelProgram &program) {
  std::string dot = "digraph sinter {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  std::map<uint32_t, std::string> lastWriter; // slot -> node name
  std::string edges;
  int node = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel &kernel = program.kernels[k];
    std::string label = kernel.name;
    if (!kernel.patterns.empty())
      absl::StrAppend(&label, "\\n[", absl::StrJoin(kernel.patterns, ", "), "]");
    absl::StrAppend(&dot, "  subgraph cluster_", k, " {\n    label=\"", escape(label), "\";\n",
                    kernel.hostCopy ? "    style=dashed;\n" : "    style=rounded;\n");
    for (const KernelMember &member : kernel.ops) {
      std::string name = absl::StrCat("n", node++);
      const TraceEntry &e = member.entry;
      if (e.kind == TraceEntry::Kind::Upload) {
        absl::StrAppend(&dot, "    ", name, " [label=\"upload -> %", e.uploadSlot + 1, "\"];\n");
        lastWriter[e.uploadSlot] = name;
        continue;
      }
      absl::StrAppend(&dot, "    ", name, " [label=\"", escape(describeOp(e.op)), "\"];\n");
      absl::StatusOr<AccessList> accesses = opAccesses(e.op);
      if (!accesses.ok())
        continue;
      for (const BufferAccess &a : *accesses) {
        uint32_t slot = Trace::slotOf(e.op.buffers[a.bufferIndex]);
        if (a.read && lastWriter.count(slot) && lastWriter[slot] != name)
          absl::StrAppend(&edges, "  ", lastWriter[slot], " -> ", name, ";\n");
      }
      for (const BufferAccess &a : *accesses)
        if (a.write)
          lastWriter[Trace::slotOf(e.op.buffers[a.bufferIndex])] = name;
    }
    absl::StrAppend(&dot, "  }\n");
  }
  absl::StrAppend(&dot, edges, "}\n");
  return dot;
}

void writeDotAndSvg(const KernelProgram &program, const std::string &pathPrefix) {
  std::string dotPath = pathPrefix + ".dot";
  {
    std::ofstream out(dotPath);
    out << programToDot(program);
    if (!out) {
      std::fprintf(stderr, "sinter: could not write %s\n", dotPath.c_str());
      return;
    }
  }
  if (std::system("command -v dot >/dev/null 2>&1") != 0)
    return;
  std::string cmd = absl::StrCat("dot -Tsvg '", dotPath, "' -o '", pathPrefix, ".svg'");
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "sinter: `%s` failed\n", cmd.c_str());
}

} // namespace sinter
