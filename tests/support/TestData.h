// TestData.h - random inputs, weights and buffer I/O shared by the backend tests.
//
// Tests of every backend (and the conformance runner) need the same few things: random floats,
// valid random weight rows for each GGUF format, poisoned output buffers and float round trips
// through a ComputeBackend. Failures are reported with ADD_FAILURE so helpers can return values.
#ifndef SINTER_TESTS_SUPPORT_TESTDATA_H
#define SINTER_TESTS_SUPPORT_TESTDATA_H

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "sinter/ComputeBackend.h"
#include "sinter/DType.h"
#include "support/Quant.h"
#include "gtest/gtest.h"

namespace sinter::test {

/// A quiet NaN with a payload no kernel produces: an output element still holding it was never
/// written, and it fails every NMSE check.
inline constexpr uint32_t kPoisonBits = 0x7FEDBEEF;

inline std::vector<uint8_t> floatBytes(absl::Span<const float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// The floats in `bytes` (a trailing partial float is dropped).
inline std::vector<float> bytesFloats(absl::Span<const uint8_t> bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty())
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

/// `count` bytes of the poison pattern (whole kPoisonBits words, then its leading bytes).
inline std::vector<uint8_t> poisonBytes(uint64_t count) {
  std::vector<uint8_t> bytes(count);
  for (uint64_t i = 0; i < count; ++i)
    bytes[i] = static_cast<uint8_t>(kPoisonBits >> (8 * (i % 4)));
  return bytes;
}

inline std::vector<float> randomFloats(size_t count, std::mt19937 &rng, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(rng);
  return values;
}

/// Byte offsets of the fp16 scales (d, dmin, m) inside one block of a block format.
inline std::vector<int> halfScaleOffsets(DType dtype) {
  switch (dtype) {
  case DType::Q4_0:
  case DType::Q5_0:
  case DType::Q8_0:
    return {0};
  case DType::Q4_1:
  case DType::Q5_1:
  case DType::Q4_K:
  case DType::Q5_K:
    return {0, 2};
  case DType::Q2_K:
    return {80, 82};
  case DType::Q3_K:
    return {108};
  case DType::Q6_K:
    return {208};
  default:
    return {};
  }
}

/// `rows` rows of `cols` weights (a block multiple) in `dtype`: quantizeRow of random floats
/// where canQuantize, otherwise random bytes with fp16 scales of sane magnitude (every bit pattern
/// of the other fields is a valid block).
inline std::vector<uint8_t> randomWeights(DType dtype, uint64_t rows, uint64_t cols,
                                          std::mt19937 &rng) {
  const DTypeInfo &info = dtypeInfo(dtype);
  uint64_t bytesPerRow = rowBytes(info, cols);
  std::vector<uint8_t> bytes(rows * bytesPerRow);
  if (canQuantize(dtype)) {
    for (uint64_t r = 0; r < rows; ++r) {
      std::vector<float> row = randomFloats(cols, rng);
      absl::Status status = quantizeRow(dtype, row.data(), bytes.data() + r * bytesPerRow, cols);
      if (!status.ok())
        ADD_FAILURE() << "quantizeRow: " << status;
    }
    return bytes;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t &b : bytes)
    b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  std::vector<int> offsets = halfScaleOffsets(dtype);
  if (offsets.empty())
    ADD_FAILURE() << "randomWeights: no scale layout for " << info.name;
  for (uint64_t block = 0; block < bytes.size() / info.bytesPerBlock; ++block) {
    for (int offset : offsets) {
      uint16_t half = floatToHalf(scale(rng));
      uint8_t *p = bytes.data() + block * info.bytesPerBlock + offset;
      p[0] = static_cast<uint8_t>(half);
      p[1] = static_cast<uint8_t>(half >> 8);
    }
  }
  return bytes;
}

/// The weights as floats, row by row (dequantizeRow), for references computed in the test.
inline std::vector<float> dequantizeWeights(DType dtype, absl::Span<const uint8_t> bytes,
                                            uint64_t rows, uint64_t cols) {
  std::vector<float> values(rows * cols);
  uint64_t bytesPerRow = rowBytes(dtypeInfo(dtype), cols);
  for (uint64_t r = 0; r < rows; ++r)
    dequantizeRow(dtype, bytes.data() + r * bytesPerRow, values.data() + r * cols, cols);
  return values;
}

/// A new buffer holding `bytes`; an invalid handle (and a test failure) on error.
inline BufferHandle uploadBytes(ComputeBackend &backend, absl::Span<const uint8_t> bytes) {
  absl::StatusOr<BufferHandle> handle = backend.allocate(bytes.size());
  if (!handle.ok()) {
    ADD_FAILURE() << "allocate(" << bytes.size() << "): " << handle.status();
    return BufferHandle{};
  }
  absl::Status status = backend.copyToDevice(bytes, *handle);
  if (!status.ok())
    ADD_FAILURE() << "copy_to_device: " << status;
  return *handle;
}

inline BufferHandle uploadFloats(ComputeBackend &backend, absl::Span<const float> values) {
  return uploadBytes(backend, floatBytes(values));
}

/// A new buffer of `count` floats, every byte poisoned.
inline BufferHandle poisonedFloats(ComputeBackend &backend, uint64_t count) {
  return uploadBytes(backend, poisonBytes(count * sizeof(float)));
}

inline std::vector<uint8_t> downloadBytes(ComputeBackend &backend, BufferHandle handle,
                                          uint64_t count) {
  std::vector<uint8_t> bytes(count);
  absl::Status status = backend.copyFromDevice(handle, absl::MakeSpan(bytes));
  if (!status.ok())
    ADD_FAILURE() << "copy_from_device: " << status;
  return bytes;
}

inline std::vector<float> downloadFloats(ComputeBackend &backend, BufferHandle handle,
                                         uint64_t count) {
  return bytesFloats(downloadBytes(backend, handle, count * sizeof(float)));
}

/// True when `value` still holds the poison pattern bit for bit.
inline bool isPoison(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits == kPoisonBits;
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_TESTDATA_H
