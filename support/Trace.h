// Trace.h - what the lazy backend records between two flushes.
//
// A Trace is a list of entries over buffer *slots*: buffers are numbered in order of first use,
// so two tokens of a decode loop that touch different buffer ids with the same structure give
// equal traces. The integers of each op stay in the entries; which of them change from flush to
// flush (and so become Plan parameters) is decided by the plan cache, not here. No MLIR: the
// Trace -> dialect builder lives in ir/.
#ifndef SINTER_SUPPORT_TRACE_H
#define SINTER_SUPPORT_TRACE_H

#include <cstdint>
#include <memory>
#include <vector>

#include "support/Ops.h"

namespace sinter {

/// One recorded step.
struct TraceEntry {
  enum class Kind : uint8_t {
    Op,     ///< a graph op; op.buffers hold slot numbers (BufferHandle{slot + 1})
    Upload, ///< copy_to_device: bytes [0, uploadBytes) of slot `uploadSlot` from payload `payload`
  };
  TraceEntry() = default;
  /// A graph op (built in place on the record path: the default constructor zeroes `op` first).
  explicit TraceEntry(const OpCall &call) : op(call) {}

  Kind kind = Kind::Op;
  OpCall op;                ///< Kind::Op
  uint32_t uploadSlot = 0;  ///< Kind::Upload
  uint64_t uploadBytes = 0; ///< Kind::Upload
  uint32_t payload = 0;     ///< Kind::Upload: index into Trace::payloads
};

/// A buffer as the trace sees it.
struct TraceBuffer {
  uint64_t sizeBytes = 0;
  /// True when the host can still observe the buffer's final version after the trace (it was not
  /// freed during the trace). Versions of a freed buffer are dead after their last read.
  bool observable = true;
};

/// Recorded work between two flushes. Slot s is named BufferHandle{s + 1} inside entries.
struct Trace {
  std::vector<TraceBuffer> buffers;
  std::vector<TraceEntry> entries;
  /// Host bytes captured by copy_to_device; not part of the structural key.
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> payloads;
  /// Which piece of a split flush this is: the count of overlapped flushes since the last
  /// complete one (LazyBackendOptions::overlapCalls), 0 without them. Part of the structural
  /// key, so that the pieces of one token (a decode's layers look alike) get a plan each and one
  /// piece's run never waits for another's.
  uint32_t segment = 0;

  /// The slot number an entry's BufferHandle names.
  static uint32_t slotOf(BufferHandle h) { return static_cast<uint32_t>(h.id - 1); }
  static BufferHandle handleOfSlot(uint32_t slot) { return BufferHandle{uint64_t(slot) + 1}; }
};

/// Names one integer argument of one entry: entry index and index into OpCall::ints.
struct IntSlot {
  uint32_t entry = 0;
  uint8_t index = 0;
  friend bool operator==(IntSlot a, IntSlot b) { return a.entry == b.entry && a.index == b.index; }
};

} // namespace sinter

#endif // SINTER_SUPPORT_TRACE_H
