// ProgramDot.h - a KernelProgram as a Graphviz picture: kernels as clusters, ops as nodes.
#ifndef SINTER_SUPPORT_PROGRAMDOT_H
#define SINTER_SUPPORT_PROGRAMDOT_H

#include <string>

#include "support/KernelProgram.h"

namespace sinter {

/// The program as a `digraph`: one cluster per kernel (labelled with its name and patterns), one
/// node per member op, an edge from the op that last wrote a slot to each later op that reads it.
std::string programToDot(const KernelProgram &program);

/// Writes `<pathPrefix>.dot` and, when the `dot` program is on PATH, `<pathPrefix>.svg`. Problems
/// are printed to stderr, never fatal: a picture is a debugging aid.
void writeDotAndSvg(const KernelProgram &program, const std::string &pathPrefix);

} // namespace sinter

#endif // SINTER_SUPPORT_PROGRAMDOT_H
