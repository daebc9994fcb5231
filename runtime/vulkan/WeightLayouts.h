// WeightLayouts.h - which device buffers hold Q4_0 weights in the tiled layout, and the in-place
// conversions between it and GGUF's.
//
// The tiled quantized_matmul (codegen/TiledWeights.h, KernelSpec::tiledWeights) reads W in a
// layout of its own. Buffers are untyped bytes to the caller (SEMANTICS.md), so the runtime
// tiles a buffer where it holds it, lazily and reversibly: a plan whose every use of a slot is
// the W of tiled products of one shape asks for that slot tiled before it runs (converting it
// in place if it is not), and any other use (a plan that reads it otherwise or writes it, an
// upload, copy_from_device) asks for GGUF's layout first. So what the caller observes never
// changes, no memory is added, and a decode, whose weights are only ever read as W, converts
// each weight buffer once. A conversion reads the buffer through the staging ring, rearranges it
// on the host and writes it back (one submit-and-wait each way): seconds for gigabytes, once.
//
// Not thread-safe on its own: the lazy backend's lock serializes its users.
#ifndef SINTER_RUNTIME_VULKAN_WEIGHTLAYOUTS_H
#define SINTER_RUNTIME_VULKAN_WEIGHTLAYOUTS_H

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "runtime/vulkan/VulkanDevice.h"

namespace sinter::runtime::vulkan {

/// A buffer's layout: GGUF's (rows 0) or tiled Q4_0 of rows x cols.
struct WeightLayout {
  int64_t rows = 0, cols = 0;
  bool tiled() const { return rows != 0; }
  friend bool operator==(const WeightLayout &a, const WeightLayout &b) {
    return a.rows == b.rows && a.cols == b.cols;
  }
  friend bool operator!=(const WeightLayout &a, const WeightLayout &b) { return !(a == b); }
};

class WeightLayouts {
public:
  explicit WeightLayouts(std::shared_ptr<VulkanDevice> device) : device_(std::move(device)) {}

  /// The layout of buffer `handle` now.
  WeightLayout layoutOf(uint64_t handle) const {
    auto it = tiled_.find(handle);
    return it == tiled_.end() ? WeightLayout{} : it->second;
  }
  /// Makes `handle`'s bytes (the range `ref`) laid out as `want`, converting in place when they
  /// are not. The buffer must hold at least want.rows x want.cols / 32 x 18 bytes.
  absl::Status ensure(uint64_t handle, const BufferRef &ref, WeightLayout want);
  /// The buffer was released: forget its layout.
  void forget(uint64_t handle) {
    if (tiled_.erase(handle))
      ++generation_;
  }
  /// Changes on every conversion and forget: a plan whose buffers and this are unchanged since
  /// its last run need not check its slots again.
  uint64_t generation() const { return generation_; }
  size_t tiledCount() const { return tiled_.size(); }

  /// Conversions (either way, by plans or by the store's reads and writes), their bytes and
  /// host seconds.
  struct Totals {
    uint64_t conversions = 0, bytes = 0;
    double seconds = 0;
  };
  Totals totals() const { return totals_; }
  /// What was converted since the last call (plans add it to their stats).
  Totals takeUnreported() {
    Totals t{totals_.conversions - reported_.conversions, totals_.bytes - reported_.bytes,
             totals_.seconds - reported_.seconds};
    reported_ = totals_;
    return t;
  }

private:
  /// One direction: GGUF -> tiled `shape` (toTiled) or tiled `shape` -> GGUF.
  absl::Status convert(uint64_t handle, const BufferRef &ref, WeightLayout shape, bool toTiled);

  std::shared_ptr<VulkanDevice> device_;
  absl::flat_hash_map<uint64_t, WeightLayout> tiled_;
  uint64_t generation_ = 1;
  Totals totals_, reported_;
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_WEIGHTLAYOUTS_H
