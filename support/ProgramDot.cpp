// ProgramDot.cpp - Graphviz output of a kernel program, folded so that a whole model fits a
// screen.
//
// Edges follow slots: a kernel that reads slot s depends on the last earlier kernel that wrote s.
// That is exactly the order the executors keep, so the picture shows the real dependencies.
// Identical layers are drawn once: edges inside a later layer repeat those of the first, an edge
// from one layer into the next is drawn once (dashed, back into the cluster), and an edge out of
// the run comes from the last layer's kernel, drawn at the first layer's.
#include "support/ProgramDot.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace sinter {
namespace {

// A label line for a box: escaped for a double-quoted dot string, left-justified.
std::string line(const std::string &s) {
  return absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}) + "\\l";
}

// Kernels that count as the same in a repeated layer: same kind and patterns, and the member op
// kinds of one a prefix of the other's (the last layer's residual add may also take the copy of
// the hidden state that follows it).
bool sameInLayer(const Kernel &a, const Kernel &b) {
  if (a.hostCopy != b.hostCopy || a.patterns != b.patterns)
    return false;
  for (size_t i = 0; i < std::min(a.ops.size(), b.ops.size()); ++i)
    if (a.ops[i].entry.kind != b.ops[i].entry.kind ||
        a.ops[i].entry.op.kind != b.ops[i].entry.op.kind)
      return false;
  return true;
}

// A kernel of copy_buffer ops only: not part of a layer's structure.
bool copyOnly(const Kernel &k) {
  if (k.hostCopy || k.ops.empty())
    return false;
  for (const KernelMember &m : k.ops)
    if (m.entry.kind != TraceEntry::Kind::Op || m.entry.op.kind != OpKind::CopyBuffer)
      return false;
  return true;
}

bool singleOp(const Kernel &k, OpKind kind) {
  return !k.hostCopy && k.ops.size() == 1 && k.ops[0].entry.kind == TraceEntry::Kind::Op &&
         k.ops[0].entry.op.kind == kind;
}

// Kernels [a, a + len) and [b, b + len) are one-op kernels of the same op kinds.
bool sameKernels(const KernelProgram &p, size_t a, size_t b, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    const Kernel &x = p.kernels[a + i], &y = p.kernels[b + i];
    if (x.hostCopy || y.hostCopy || x.ops.size() != 1 || y.ops.size() != 1 ||
        x.ops[0].entry.op.kind != y.ops[0].entry.op.kind)
      return false;
  }
  return true;
}

bool hasKind(const KernelProgram &p, size_t from, size_t len, OpKind kind) {
  for (size_t i = from; i < from + len - 1; ++i)
    if (singleOp(p.kernels[i], kind))
      return true;
  return false;
}

bool isAttention(const std::vector<KernelMember> &ops, size_t group) {
  for (size_t i = 0; i < group; ++i)
    if (ops[i].entry.kind == TraceEntry::Kind::Op && ops[i].entry.op.kind == OpKind::AttnScore)
      return true;
  return false;
}

} // namespace

OpCall stepValues(const KernelMember &m, const Trace *recorded) {
  OpCall op = m.entry.op;
  if (recorded && m.traceEntry < recorded->entries.size() &&
      recorded->entries[m.traceEntry].kind == TraceEntry::Kind::Op &&
      recorded->entries[m.traceEntry].op.kind == op.kind)
    for (int i = 0; i < 5; ++i)
      if (m.paramOf[i] >= 0) // traceEntry is known for members with parameters
        op.ints[i] = recorded->entries[m.traceEntry].op.ints[i];
  return op;
}

std::string paramNames(const KernelMember &m) {
  std::string params;
  for (int i = 0; i < 5; ++i)
    if (m.paramOf[i] >= 0)
      absl::StrAppend(&params, params.empty() ? "" : ", ", opInfo(m.entry.op.kind).intNames[i],
                      "=$", m.paramOf[i]);
  return params;
}

size_t repeatedGroup(const std::vector<KernelMember> &ops) {
  for (size_t len = 1; 2 * len <= ops.size(); ++len) {
    if (ops.size() % len)
      continue;
    bool periodic = true;
    for (size_t i = len; i < ops.size() && periodic; ++i)
      periodic = ops[i].entry.kind == ops[i - len].entry.kind &&
                 ops[i].entry.op.kind == ops[i - len].entry.op.kind;
    if (periodic)
      return len;
  }
  return ops.size();
}

LayerRun findRepeatedLayers(const KernelProgram &program, uint32_t layers) {
  const size_t n = program.kernels.size();
  std::vector<size_t> seq; // the kernels that make a layer's structure
  for (size_t k = 0; k < n; ++k)
    if (!copyOnly(program.kernels[k]))
      seq.push_back(k);
  auto sameBlock = [&](size_t a, size_t b, size_t len) {
    for (size_t i = 0; i < len; ++i)
      if (!sameInLayer(program.kernels[seq[a + i]], program.kernels[seq[b + i]]))
        return false;
    return true;
  };
  size_t bestFirst = 0, bestLen = 0, bestCount = 0;
  bool bestMatches = false; // count == layers
  for (size_t len = 1; 2 * len <= seq.size(); ++len)
    for (size_t first = 0; first + 2 * len <= seq.size(); ++first) {
      size_t count = 1;
      while (first + (count + 1) * len <= seq.size() && sameBlock(first, first + count * len, len))
        ++count;
      if (count < 2)
        continue;
      const bool matches = layers > 0 && count == layers;
      if ((matches && !bestMatches) ||
          (matches == bestMatches && count * len > bestCount * bestLen)) {
        bestFirst = first, bestLen = len, bestCount = count, bestMatches = matches;
      }
    }
  LayerRun run;
  run.layer.assign(n, -1);
  run.shownAs.resize(n);
  for (size_t k = 0; k < n; ++k)
    run.shownAs[k] = k;
  if (bestCount == 0)
    return run;
  run.count = bestCount;
  run.perLayer = bestLen;
  for (size_t i = 0; i < bestLen * bestCount; ++i) {
    const size_t k = seq[bestFirst + i];
    run.layer[k] = int(i / bestLen);
    run.shownAs[k] = seq[bestFirst + i % bestLen];
  }
  return run;
}

std::string programToDot(const KernelProgram &program, const DotOptions &options) {
  const size_t n = program.kernels.size();
  const LayerRun run = findRepeatedLayers(program, options.layers);
  std::vector<int> launch(n, -1);
  for (size_t k = 0, next = 0; k < n; ++k)
    if (!program.kernels[k].hostCopy)
      launch[k] = int(next++);
  // Unfused attention: each head's score, softmax and value kernels, head after head, become one
  // node (the first head's kernels stand for the rest).
  std::vector<size_t> headOf(n);
  std::vector<size_t> heads(n, 1), groupLen(n, 1);
  for (size_t k = 0; k < n; ++k)
    headOf[k] = k;
  for (size_t k = 0; k < n;) {
    size_t len = 0, times = 1;
    for (size_t g = 2; g <= 4 && !len; ++g) {
      if (k + 2 * g > n || !singleOp(program.kernels[k], OpKind::AttnScore))
        break;
      size_t t = 1;
      while (k + (t + 1) * g <= n && sameKernels(program, k, k + t * g, g))
        ++t;
      if (t >= 2 && sameKernels(program, k, k + g, g) &&
          !hasKind(program, k + 1, g, OpKind::AttnScore))
        len = g, times = t;
    }
    if (!len) {
      ++k;
      continue;
    }
    for (size_t i = 0; i < len * times; ++i)
      headOf[k + i] = k;
    heads[k] = times;
    groupLen[k] = len;
    k += len * times;
  }
  auto nodeOf = [&](size_t k) { return headOf[run.shownAs[k]]; };

  std::string dot = "digraph sinter {\n  rankdir=TB;\n  ranksep=0.3;\n  nodesep=0.25;\n"
                    "  fontname=\"Helvetica\";\n"
                    "  node [shape=box, fontsize=10, fontname=\"Helvetica\"];\n"
                    "  edge [fontsize=9, fontname=\"Helvetica\"];\n";
  if (!options.title.empty())
    absl::StrAppend(&dot, "  labelloc=t;\n  label=\"", line(options.title), "\";\n");
  auto memberLines = [&](const KernelMember &m) {
    std::string params = paramNames(m);
    return line(absl::StrCat("  ", describeOp(stepValues(m, options.recorded)),
                             params.empty() ? "" : absl::StrCat("  {params: ", params, "}")));
  };
  auto node = [&](size_t k) {
    const Kernel &kernel = program.kernels[k];
    std::string label;
    if (kernel.hostCopy) {
      for (const KernelMember &m : kernel.ops)
        label += line(absl::StrCat("host copy: upload(%", m.entry.uploadSlot + 1, ", ",
                                   m.entry.uploadBytes, " bytes)"));
      return absl::StrCat("    k", k, " [style=dashed, label=\"", label, "\"];\n");
    }
    if (heads[k] > 1) { // unfused attention heads
      const size_t last = k + groupLen[k] * heads[k] - 1;
      label = line(absl::StrCat("kernels ", launch[k], "-", launch[last], ": ", groupLen[k],
                                " a head × ", heads[k], " heads"));
      for (size_t i = k; i < k + groupLen[k]; ++i)
        label += memberLines(program.kernels[i].ops[0]);
      label += line(absl::StrCat("  × ", heads[k], " heads (other offsets)"));
      return absl::StrCat("    k", k, " [label=\"", label, "\"];\n");
    }
    label = line(absl::StrCat("kernel ", launch[k], ": ", kernel.name));
    if (!kernel.patterns.empty())
      label += line(absl::StrCat("[", absl::StrJoin(kernel.patterns, ", "), "]"));
    const size_t shown = repeatedGroup(kernel.ops);
    for (size_t j = 0; j < shown; ++j)
      label += memberLines(kernel.ops[j]);
    if (shown < kernel.ops.size()) {
      const size_t times = kernel.ops.size() / shown;
      label += line(isAttention(kernel.ops, shown)
                        ? absl::StrCat("  × ", times, " heads (other offsets)")
                        : absl::StrCat("  × ", times, " (other offsets)"));
    }
    return absl::StrCat("    k", k, " [label=\"", label, "\"];\n");
  };
  auto drawn = [&](size_t k) { return nodeOf(k) == k; };

  // The layer cluster, then every other node.
  if (run.count > 0) {
    size_t first = n, last = 0, firstShown = n;
    for (size_t k = 0; k < n; ++k)
      if (run.layer[k] >= 0) {
        first = std::min(first, k);
        last = k;
      }
    int perLayer = 0;
    for (size_t k = 0; k < n; ++k)
      perLayer += run.layer[k] == 0 && launch[k] >= 0;
    firstShown = first;
    std::string label =
        line(absl::StrCat("× ", run.count, " layers: kernels ", launch[first], "-", launch[last],
                          ", layer 0 shown (", perLayer, " kernels a layer)"));
    for (size_t k = 0; k < n; ++k)
      if (run.layer[k] > 0 && program.kernels[k].name != program.kernels[run.shownAs[k]].name)
        label += line(absl::StrCat("layer ", run.layer[k], ": kernel ", launch[k], " is ",
                                   program.kernels[k].name));
    absl::StrAppend(&dot, "  subgraph cluster_layers {\n    style=rounded;\n    label=\"", label,
                    "\";\n");
    for (size_t k = firstShown; k < n; ++k)
      if (run.layer[k] == 0 && drawn(k))
        absl::StrAppend(&dot, node(k));
    absl::StrAppend(&dot, "  }\n");
  }
  for (size_t k = 0; k < n; ++k)
    if (run.layer[k] < 0 && drawn(k))
      absl::StrAppend(&dot, node(k));

  // Edges: (from, to, tag) -> buffers; tag 0: plain, 1: into the next layer, 2 + L: out of the
  // run from layer L (L > 0).
  std::map<std::tuple<size_t, size_t, size_t>, std::set<uint32_t>> edges;
  std::map<uint32_t, size_t> lastWriter;
  // Kernel k reads `slot`: an edge from its last writer, unless the picture has it already.
  auto readEdge = [&](uint32_t slot, size_t k, const std::set<uint32_t> &writes) {
    auto w = lastWriter.find(slot);
    if (w == lastWriter.end() || writes.count(slot))
      return; // written before the trace, or inside this kernel
    const size_t from = w->second;
    const int lf = run.layer[from], lk = run.layer[k];
    size_t tag = 0;
    if (lf >= 0 && lk >= 0) {
      if (lf == lk && lk > 0)
        return; // the first layer shows it
      if (lf != lk) {
        if (lf > 0)
          return; // drawn once, from the first layer into the second
        tag = 1;
      }
    } else if (lf > 0) {
      tag = 2 + size_t(lf);
    } else if (lk > 0) {
      auto shown = edges.find({nodeOf(from), nodeOf(k), 0});
      if (shown != edges.end() && !shown->second.count(slot))
        return; // the first layer's edge from the same kernel names its own buffer
    }
    if (nodeOf(from) != nodeOf(k) || tag == 1)
      edges[{nodeOf(from), nodeOf(k), tag}].insert(slot);
  };
  for (size_t k = 0; k < n; ++k) {
    std::set<uint32_t> writes;
    for (const KernelMember &m : program.kernels[k].ops) {
      const TraceEntry &e = m.entry;
      if (e.kind == TraceEntry::Kind::Upload) {
        writes.insert(e.uploadSlot);
        continue;
      }
      absl::StatusOr<AccessList> accesses = opAccesses(e.op);
      if (!accesses.ok())
        continue;
      for (const BufferAccess &a : *accesses) {
        const uint32_t slot = Trace::slotOf(e.op.buffers[a.bufferIndex]);
        if (a.read)
          readEdge(slot, k, writes);
        if (a.write)
          writes.insert(slot);
      }
    }
    for (uint32_t slot : writes)
      lastWriter[slot] = k;
  }
  for (const auto &[key, slots] : edges) {
    const auto &[from, to, tag] = key;
    std::vector<std::string> names;
    for (uint32_t s : slots)
      names.push_back(absl::StrCat("%", s + 1));
    std::string label = absl::StrJoin(names, ", ");
    if (tag == 1)
      label += " (next layer)";
    else if (tag >= 2)
      label += absl::StrCat(" (layer ", tag - 2, ")");
    absl::StrAppend(&dot, "  k", from, " -> k", to, " [label=\"", line(label), "\"",
                    tag == 1 ? ", style=dashed, constraint=false" : "", "];\n");
  }
  absl::StrAppend(&dot, "}\n");
  return dot;
}

void writeDotAndSvg(const KernelProgram &program, const std::string &pathPrefix,
                    const DotOptions &options) {
  std::string dotPath = pathPrefix + ".dot";
  {
    std::ofstream out(dotPath);
    out << programToDot(program, options);
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
