// HostSteps.cpp - the bindable-range check and the host run of a Vulkan plan's launches.
#include "runtime/vulkan/HostSteps.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sinter/Status.h"
#include "support/Ops.h"
#include "support/Trace.h"

namespace sinter::runtime::vulkan {

bool membersFitBindings(const DeviceCaps &caps, absl::Span<const KernelMember> members,
                        const StepAccesses &access, const PlanArgs &args) {
  const uint64_t limit = bindLimit(caps);
  for (int i = 0; i < access.count; ++i) {
    const auto *ref = static_cast<const BufferRef *>(args.slotDevice[access.slots[i]]);
    if (!ref || ref->size <= limit)
      continue;
    // A large buffer: where do this run's members reach into it?
    for (const KernelMember &m : members) {
      OpCall op = boundOp(m, args.params);
      absl::StatusOr<AccessList> accesses = opAccesses(op);
      if (!accesses.ok())
        return false;
      for (const BufferAccess &a : *accesses)
        if (Trace::slotOf(op.buffers[a.bufferIndex]) == access.slots[i] && a.size > 0 &&
            (a.offset > limit || a.size > limit - a.offset))
          return false;
    }
  }
  return true;
}

absl::Status runMembersOnHost(VulkanDevice &device, absl::Span<const KernelMember> members,
                              const PlanArgs &args) {
  // Each slot the members touch: host memory for bytes [0, end) of which [lo, end) are filled,
  // and the bytes written.
  struct HostCopy {
    uint64_t lo = UINT64_MAX, end = 0, writeLo = UINT64_MAX, writeEnd = 0;
    std::unique_ptr<uint8_t[]> bytes;
  };
  absl::flat_hash_map<uint32_t, HostCopy> copies;
  std::vector<OpCall> ops;
  for (const KernelMember &m : members) {
    ops.push_back(boundOp(m, args.params));
    SINTER_ASSIGN_OR_RETURN(AccessList accesses, opAccesses(ops.back()));
    for (const BufferAccess &a : accesses) {
      if (a.size == 0)
        continue;
      HostCopy &c = copies[Trace::slotOf(ops.back().buffers[a.bufferIndex])];
      c.lo = std::min(c.lo, a.offset);
      c.end = std::max(c.end, a.offset + a.size);
      if (a.write) {
        c.writeLo = std::min(c.writeLo, a.offset);
        c.writeEnd = std::max(c.writeEnd, a.offset + a.size);
      }
    }
  }
  for (auto &[slot, c] : copies) {
    const auto &ref = *static_cast<const BufferRef *>(args.slotDevice[slot]);
    c.bytes.reset(new uint8_t[c.end]);
    SINTER_RETURN_IF_ERROR(
        device.read(ref, absl::MakeSpan(c.bytes.get() + c.lo, c.end - c.lo), c.lo));
  }
  for (const OpCall &op : ops)
    executeReference(op, [&](BufferHandle h) { return copies[Trace::slotOf(h)].bytes.get(); });
  for (auto &[slot, c] : copies) {
    if (c.writeEnd == 0)
      continue;
    const auto &ref = *static_cast<const BufferRef *>(args.slotDevice[slot]);
    SINTER_RETURN_IF_ERROR(device.write(
        ref, absl::MakeConstSpan(c.bytes.get() + c.writeLo, c.writeEnd - c.writeLo), c.writeLo));
  }
  return absl::OkStatus();
}

} // namespace sinter::runtime::vulkan
