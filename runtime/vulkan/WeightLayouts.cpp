// WeightLayouts.cpp - in-place conversions between GGUF's Q4_0 layout and the tiled one
// (WeightLayouts.h).
#include "runtime/vulkan/WeightLayouts.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/TiledWeights.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

absl::Status WeightLayouts::ensure(uint64_t handle, const BufferRef &ref, WeightLayout want) {
  const WeightLayout have = layoutOf(handle);
  if (have == want)
    return absl::OkStatus();
  if (have.tiled()) // back to GGUF's first (another tiled shape is rare: two steps)
    SINTER_RETURN_IF_ERROR(convert(handle, ref, have, /*toTiled=*/false));
  if (want.tiled())
    SINTER_RETURN_IF_ERROR(convert(handle, ref, want, /*toTiled=*/true));
  return absl::OkStatus();
}

absl::Status WeightLayouts::convert(uint64_t handle, const BufferRef &ref, WeightLayout shape,
                                    bool toTiled) {
  auto start = std::chrono::steady_clock::now();
  const uint64_t bytes = uint64_t(shape.rows) * uint64_t(shape.cols / 32) * 18;
  if (bytes > ref.size)
    return absl::InternalError(absl::StrCat("vulkan: buffer ", handle, " holds ", ref.size,
                                            " bytes, a ", shape.rows, " x ", shape.cols,
                                            " Q4_0 matrix needs ", bytes));
  std::vector<uint8_t> host(bytes);
  SINTER_RETURN_IF_ERROR(device_->read(ref, absl::MakeSpan(host)));
  absl::StatusOr<std::vector<uint8_t>> converted =
      toTiled ? codegen::tileQ4_0(host, shape.rows, shape.cols)
              : codegen::untileQ4_0(host, shape.rows, shape.cols);
  SINTER_RETURN_IF_ERROR(converted.status());
  SINTER_RETURN_IF_ERROR(device_->write(ref, *converted));
  if (toTiled)
    tiled_[handle] = shape;
  else
    tiled_.erase(handle);
  ++generation_;
  ++totals_.conversions;
  totals_.bytes += bytes;
  totals_.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return absl::OkStatus();
}

} // namespace sinter::runtime::vulkan
