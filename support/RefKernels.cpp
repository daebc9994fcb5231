// RefKernels.cpp - the reference kernels: one scalar loop per OpKind, accumulating in double.
//
// These loops are the oracle every other backend and every fusion is compared with, so they
// follow SEMANTICS.md's formulas literally and favour obviousness over speed. Buffers are byte
// arrays: floats are loaded and stored with memcpy, so no alignment is assumed.
#include <cmath>
#include <cstring>
#include <vector>

#include "sinter/DType.h"
#include "support/Ops.h"
#include "support/Quant.h"

namespace sinter {
namespace {

float load(const uint8_t *base, uint64_t index) {
  float value;
  std::memcpy(&value, base + index * sizeof(float), sizeof(float));
  return value;
}

void store(uint8_t *base, uint64_t index, double value) {
  float f = static_cast<float>(value);
  std::memcpy(base + index * sizeof(float), &f, sizeof(float));
}

// The slots below follow the builders in Ops.h: buffers and integers in the order of the
// ComputeBackend method's parameters.

void runMatmul(const OpCall &op, BufferDataFn data) {
  const uint8_t *a = data(op.buffers[0]);
  const uint8_t *b = data(op.buffers[1]);
  uint8_t *out = data(op.buffers[2]);
  uint64_t m = op.ints[0], n = op.ints[1], k = op.ints[2];
  // No output: nothing to do. Validation bounds m·n by out's size but not m or n alone, so a
  // matmul of n = 0 may name m up to 2^32 - 1 (the C ABI fuzzer found one taking a minute).
  if (m == 0 || n == 0)
    return;
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (uint64_t p = 0; p < k; ++p)
        sum += double(load(a, i * k + p)) * double(load(b, p * n + j));
      store(out, i * n + j, sum);
    }
  }
}

// Reads all of `in` (max and sum) before writing; then element i is read before it is written,
// so in == out is fine.
void runSoftmax(const OpCall &op, BufferDataFn data) {
  const uint8_t *in = data(op.buffers[0]);
  uint8_t *out = data(op.buffers[1]);
  uint64_t size = op.ints[0];
  if (size == 0)
    return;
  double maxValue = load(in, 0);
  for (uint64_t i = 1; i < size; ++i)
    maxValue = std::fmax(maxValue, double(load(in, i)));
  double sum = 0.0;
  for (uint64_t i = 0; i < size; ++i)
    sum += std::exp(double(load(in, i)) - maxValue);
  for (uint64_t i = 0; i < size; ++i)
    store(out, i, std::exp(double(load(in, i)) - maxValue) / sum);
}

void runRmsNorm(const OpCall &op, BufferDataFn data) {
  const uint8_t *in = data(op.buffers[0]);
  const uint8_t *weight = data(op.buffers[1]);
  uint8_t *out = data(op.buffers[2]);
  uint64_t size = op.ints[0];
  if (size == 0)
    return;
  double sumSquares = 0.0;
  for (uint64_t i = 0; i < size; ++i) {
    double x = load(in, i);
    sumSquares += x * x;
  }
  double scale = 1.0 / std::sqrt(sumSquares / double(size) + double(op.scalar));
  for (uint64_t i = 0; i < size; ++i)
    store(out, i, double(load(in, i)) * double(load(weight, i)) * scale);
}

// Rotates the interleaved pairs of `nHeads` contiguous heads of `x` in place.
void ropeHeads(uint8_t *x, uint64_t pos, uint64_t headDim, double freqBase, uint64_t nHeads) {
  for (uint64_t h = 0; h < nHeads; ++h) {
    uint64_t base = h * headDim;
    for (uint64_t i = 0; i < headDim / 2; ++i) {
      double angle = double(pos) * std::pow(freqBase, -2.0 * double(i) / double(headDim));
      double c = std::cos(angle), s = std::sin(angle);
      double x0 = load(x, base + 2 * i), x1 = load(x, base + 2 * i + 1);
      store(x, base + 2 * i, x0 * c - x1 * s);
      store(x, base + 2 * i + 1, x0 * s + x1 * c);
    }
  }
}

void runRope(const OpCall &op, BufferDataFn data) {
  uint64_t pos = op.ints[0], headDim = op.ints[1], nHeadsQ = op.ints[2], nHeadsK = op.ints[3];
  ropeHeads(data(op.buffers[0]), pos, headDim, op.scalar, nHeadsQ);
  ropeHeads(data(op.buffers[1]), pos, headDim, op.scalar, nHeadsK);
}

void runSilu(const OpCall &op, BufferDataFn data) {
  const uint8_t *in = data(op.buffers[0]);
  uint8_t *out = data(op.buffers[1]);
  for (uint64_t i = 0; i < op.ints[0]; ++i) {
    double x = load(in, i);
    store(out, i, x / (1.0 + std::exp(-x)));
  }
}

void runElementMul(const OpCall &op, BufferDataFn data) {
  const uint8_t *a = data(op.buffers[0]);
  const uint8_t *b = data(op.buffers[1]);
  uint8_t *out = data(op.buffers[2]);
  for (uint64_t i = 0; i < op.ints[0]; ++i)
    store(out, i, double(load(a, i)) * double(load(b, i)));
}

void runAdd(const OpCall &op, BufferDataFn data) {
  const uint8_t *a = data(op.buffers[0]);
  const uint8_t *b = data(op.buffers[1]);
  uint8_t *out = data(op.buffers[2]);
  for (uint64_t i = 0; i < op.ints[0]; ++i)
    store(out, i, double(load(a, i)) + double(load(b, i)));
}

// memmove: src and dst may be the same buffer with overlapping ranges.
void runCopyBuffer(const OpCall &op, BufferDataFn data) {
  if (op.ints[0] == 0)
    return;
  std::memmove(data(op.buffers[1]), data(op.buffers[0]), op.ints[0]);
}

void runCopyBufferOffset(const OpCall &op, BufferDataFn data) {
  uint64_t srcOffset = op.ints[0], dstOffset = op.ints[1], size = op.ints[2];
  if (size == 0)
    return;
  std::memmove(data(op.buffers[1]) + dstOffset, data(op.buffers[0]) + srcOffset, size);
}

void runAttnScore(const OpCall &op, BufferDataFn data) {
  const uint8_t *q = data(op.buffers[0]);
  const uint8_t *kCache = data(op.buffers[1]);
  uint8_t *scores = data(op.buffers[2]);
  uint64_t headDim = op.ints[0], seqLen = op.ints[1], headOffset = op.ints[2];
  uint64_t kvOffset = op.ints[3], kvStride = op.ints[4];
  double scale = 1.0 / std::sqrt(double(headDim));
  for (uint64_t t = 0; t < seqLen; ++t) {
    double dot = 0.0;
    for (uint64_t d = 0; d < headDim; ++d)
      dot += double(load(q, headOffset + d)) * double(load(kCache, t * kvStride + kvOffset + d));
    store(scores, t, dot * scale);
  }
}

void runAttnValue(const OpCall &op, BufferDataFn data) {
  const uint8_t *weights = data(op.buffers[0]);
  const uint8_t *vCache = data(op.buffers[1]);
  uint8_t *out = data(op.buffers[2]);
  uint64_t headDim = op.ints[0], seqLen = op.ints[1], kvOffset = op.ints[2];
  uint64_t kvStride = op.ints[3], outOffset = op.ints[4];
  for (uint64_t d = 0; d < headDim; ++d) {
    double sum = 0.0;
    for (uint64_t t = 0; t < seqLen; ++t)
      sum += double(load(weights, t)) * double(load(vCache, t * kvStride + kvOffset + d));
    store(out, outOffset + d, sum);
  }
}

// Dequantizes one row at a time into a scratch row (bit-exact with ggml), then a double dot.
void runQuantizedMatmul(const OpCall &op, BufferDataFn data) {
  const uint8_t *weights = data(op.buffers[0]);
  const uint8_t *x = data(op.buffers[1]);
  uint8_t *out = data(op.buffers[2]);
  uint64_t nRows = op.ints[0], nCols = op.ints[1];
  uint64_t bytesPerRow = rowBytes(dtypeInfo(op.dtype), nCols);
  std::vector<float> row(nCols);
  for (uint64_t r = 0; r < nRows; ++r) {
    dequantizeRow(op.dtype, weights + r * bytesPerRow, row.data(), nCols);
    double dot = 0.0;
    for (uint64_t c = 0; c < nCols; ++c)
      dot += double(row[c]) * double(load(x, c));
    store(out, r, dot);
  }
}

} // namespace

void executeReference(const OpCall &op, BufferDataFn data) {
  static_assert(kNumOpKinds == 12, "add the new op's reference kernel here");
  switch (op.kind) {
  case OpKind::Matmul:
    return runMatmul(op, data);
  case OpKind::Softmax:
    return runSoftmax(op, data);
  case OpKind::RmsNorm:
    return runRmsNorm(op, data);
  case OpKind::Rope:
    return runRope(op, data);
  case OpKind::Silu:
    return runSilu(op, data);
  case OpKind::ElementMul:
    return runElementMul(op, data);
  case OpKind::Add:
    return runAdd(op, data);
  case OpKind::CopyBuffer:
    return runCopyBuffer(op, data);
  case OpKind::CopyBufferOffset:
    return runCopyBufferOffset(op, data);
  case OpKind::AttnScore:
    return runAttnScore(op, data);
  case OpKind::AttnValue:
    return runAttnValue(op, data);
  case OpKind::QuantizedMatmul:
    return runQuantizedMatmul(op, data);
  }
}

} // namespace sinter
