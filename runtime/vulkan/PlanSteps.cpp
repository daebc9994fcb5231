// PlanSteps.cpp - the slots a trace entry reads and writes, for a step's barriers.
#include "runtime/vulkan/PlanSteps.h"

#include "support/Ops.h"

namespace sinter::runtime::vulkan {

StepAccesses accessesOf(const TraceEntry &e) {
  StepAccesses s;
  if (e.kind == TraceEntry::Kind::Upload) {
    s.add(e.uploadSlot, /*read=*/false, /*write=*/true);
    return s;
  }
  const OpCall &op = e.op;
  int n = opInfo(op.kind).numBuffers;
  bool read[3] = {}, write[3] = {};
  absl::StatusOr<AccessList> accesses = opAccesses(op);
  for (int i = 0; i < n && !accesses.ok(); ++i)
    read[i] = write[i] = true; // validated when recorded; be conservative anyway
  if (accesses.ok()) {
    // Sizes are not looked at: one that is 0 for these integers may not be for others.
    for (const BufferAccess &a : *accesses) {
      read[a.bufferIndex] |= a.read;
      write[a.bufferIndex] |= a.write;
    }
  }
  for (int i = 0; i < n; ++i)
    s.add(Trace::slotOf(op.buffers[i]), read[i], write[i]);
  return s;
}

} // namespace sinter::runtime::vulkan
