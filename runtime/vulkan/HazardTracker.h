// HazardTracker.h - where a command buffer of a flush needs a memory barrier.
//
// Steps (uploads, copies, dispatches) touch buffer slots; each step says which slots it reads
// and writes (StepAccesses). Since the last barrier the tracker remembers which slots were read
// and which written. A step must wait for the steps before it when it reads a slot written since
// then (read after write), or writes a slot read or written since then (write after read, write
// after write); readers of the same slot, and steps on distinct slots, run without one. Slots
// are whole buffers: distinct slots never share bytes (each is its own sub-allocated range).
#ifndef SINTER_RUNTIME_VULKAN_HAZARDTRACKER_H
#define SINTER_RUNTIME_VULKAN_HAZARDTRACKER_H

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace sinter::runtime::vulkan {

/// The slots one step touches: an op's buffer operands, or a fused kernel's (kMax at most).
struct StepAccesses {
  /// Stacked Q, K and V with their tails touch 11 (the norm's three, three weights, three
  /// outputs, two caches).
  static constexpr int kMax = 16;
  std::array<uint32_t, kMax> slots{};
  uint8_t count = 0;
  uint16_t readMask = 0, writeMask = 0; ///< bit i: slots[i]

  /// False when the step would touch more than kMax distinct slots (nothing is added then).
  bool add(uint32_t slot, bool read, bool write) {
    for (int i = 0; i < count; ++i)
      if (slots[i] == slot) {
        readMask |= uint16_t(read) << i;
        writeMask |= uint16_t(write) << i;
        return true;
      }
    if (count == kMax)
      return false;
    slots[count] = slot;
    readMask |= uint16_t(read) << count;
    writeMask |= uint16_t(write) << count;
    ++count;
    return true;
  }
  bool reads(int i) const { return (readMask >> i) & 1; }
  bool writes(int i) const { return (writeMask >> i) & 1; }
};

class HazardTracker {
public:
  explicit HazardTracker(size_t slots) : state_(slots, 0) {}

  /// True when `s` must wait for the steps since the last barrier; then record one and clear().
  bool needsBarrier(const StepAccesses &s) const {
    for (int i = 0; i < s.count; ++i) {
      uint8_t st = state_[s.slots[i]];
      if ((s.reads(i) && (st & kWritten)) || (s.writes(i) && st))
        return true;
    }
    return false;
  }
  /// A barrier was recorded: everything before it is visible to everything after it.
  void clear() { std::fill(state_.begin(), state_.end(), 0); }
  /// `s` was recorded.
  void mark(const StepAccesses &s) {
    for (int i = 0; i < s.count; ++i)
      state_[s.slots[i]] |= (s.reads(i) ? kRead : 0) | (s.writes(i) ? kWritten : 0);
  }

private:
  static constexpr uint8_t kRead = 1, kWritten = 2;
  std::vector<uint8_t> state_;
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_HAZARDTRACKER_H
