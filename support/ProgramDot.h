// ProgramDot.h - a KernelProgram for people: the Graphviz picture, and the views of a program
// that sinter-dump's text and the picture share (parameters with the step's values, repeated
// groups of member ops, repeated layers).
#ifndef SINTER_SUPPORT_PROGRAMDOT_H
#define SINTER_SUPPORT_PROGRAMDOT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/KernelProgram.h"
#include "support/Trace.h"

namespace sinter {

/// The op of member `m` with the integers this step ran with: a member's Plan parameters hold
/// the value of the compiled trace (often 0), so they are taken from `recorded` when it is given
/// and its entry m.traceEntry is the same kind of op.
OpCall stepValues(const KernelMember &m, const Trace *recorded);

/// The member's Plan parameters as "pos=$1, dst_offset=$2" ("" when it has none).
std::string paramNames(const KernelMember &m);

/// The length of the shortest group of op kinds that `ops` repeats from start to end at least
/// twice (attention: one head's score, softmax, value), or ops.size() when there is none.
size_t repeatedGroup(const std::vector<KernelMember> &ops);

/// Identical layers found in a program. A kernel made only of copy_buffer ops (the decoder's copy
/// of the hidden state, which the last layer may add) does not count as part of a layer's
/// structure; in fused programs such a copy may also join a kernel of one layer (a kernel counts
/// as the same when its member op kinds extend the other's).
struct LayerRun {
  size_t count = 0;    ///< layers; 0: no run of at least two was found
  size_t perLayer = 0; ///< kernels a layer (copy-only kernels and host copies not counted)
  /// Per kernel of the program: its layer, or -1 outside the run (copy-only kernels included).
  std::vector<int> layer;
  /// Per kernel: the first layer's kernel that stands for it (itself outside the run).
  std::vector<size_t> shownAs;
};

/// The longest run of at least two back-to-back identical blocks of kernels (same patterns and
/// member op kinds), ties to the shortest block. With `layers` > 0 (the model's layer count)
/// runs of exactly that many blocks are preferred.
LayerRun findRepeatedLayers(const KernelProgram &program, uint32_t layers = 0);

/// What the picture shows besides the program.
struct DotOptions {
  /// The recorded trace of the step: parameters show its values (stepValues). Null: "$N".
  const Trace *recorded = nullptr;
  /// The model's layer count, when known (findRepeatedLayers).
  uint32_t layers = 0;
  /// A title line (sinter-dump's summary).
  std::string title;
};

/// The program as a `digraph`, small enough to read for a whole model: one node per kernel,
/// numbered as sinter-dump numbers kernels, listing its patterns and member ops (a repeated group
/// once, attention's as "x H heads"); identical layers drawn once in a cluster labelled
/// "x N layers"; an edge from the kernel that last wrote a buffer to each later kernel that
/// reads it, labelled with the buffers (%N).
std::string programToDot(const KernelProgram &program, const DotOptions &options = {});

/// Writes `<pathPrefix>.dot` and, when the `dot` program is on PATH, `<pathPrefix>.svg`. Problems
/// are printed to stderr, never fatal: a picture is a debugging aid.
void writeDotAndSvg(const KernelProgram &program, const std::string &pathPrefix,
                    const DotOptions &options = {});

} // namespace sinter

#endif // SINTER_SUPPORT_PROGRAMDOT_H
