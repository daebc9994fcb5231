// KernelHarness.h - runs one OpCall on a compiled CPU plan and on the reference kernel.
//
// The op's buffers are trace slots 0..n-1 (BufferHandle{1..n}). Inputs get random floats, every
// byte of a written buffer starts as the poison pattern, and both runs start from the same bytes,
// so the comparison catches unwritten elements (poison is NaN), writes outside the op's range
// (bytes must stay as they were) and wrong values (NMSE per SEMANTICS.md).
#ifndef SINTER_TESTS_UNIT_CODEGEN_KERNELHARNESS_H
#define SINTER_TESTS_UNIT_CODEGEN_KERNELHARNESS_H

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/CpuCompiler.h"
#include "support/Ops.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "gtest/gtest.h"

namespace sinter::test {

/// The bytes of one op's buffers.
struct OpBuffers {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<uint8_t *> data() {
    std::vector<uint8_t *> d;
    for (auto &b : bytes)
      d.push_back(b.data());
    return d;
  }
};

/// A one-op trace over slots 0..numBuffers-1 of the given sizes.
inline Trace singleOpTrace(const OpCall &op, const std::vector<uint64_t> &sizes) {
  Trace t;
  for (uint64_t s : sizes)
    t.buffers.push_back({s, true});
  TraceEntry e;
  e.op = op;
  t.entries.push_back(e);
  return t;
}

/// The trace slot of `op`'s buffer operand `index`.
inline uint32_t slotOfOperand(const OpCall &op, uint8_t index) {
  return Trace::slotOf(op.buffers[index]);
}

/// Slot sizes that fit `op` exactly, plus `slack` bytes at the end of each.
inline std::vector<uint64_t> fittingSizes(const OpCall &op, uint64_t slack = 64) {
  uint32_t numSlots = 0;
  for (int i = 0; i < opInfo(op.kind).numBuffers; ++i)
    numSlots = std::max(numSlots, slotOfOperand(op, uint8_t(i)) + 1);
  std::vector<uint64_t> sizes(numSlots, 0);
  absl::StatusOr<AccessList> acc = opAccesses(op);
  EXPECT_TRUE(acc.ok()) << acc.status();
  if (!acc.ok())
    return sizes;
  for (const BufferAccess &a : *acc) {
    uint32_t s = slotOfOperand(op, a.bufferIndex);
    sizes[s] = std::max(sizes[s], a.offset + a.size);
  }
  for (uint64_t &s : sizes)
    s += slack;
  return sizes;
}

/// Random contents for `op`'s buffers: weights of op.dtype for quantized_matmul's first buffer,
/// floats in [-1, 1) for the others, and poison over every buffer the op writes (but not reads).
inline OpBuffers makeBuffers(const OpCall &op, const std::vector<uint64_t> &sizes,
                             std::mt19937 &rng) {
  OpBuffers buffers;
  AccessList acc = *opAccesses(op);
  for (size_t i = 0; i < sizes.size(); ++i) {
    bool writeOnly = true;
    for (const BufferAccess &a : acc)
      if (slotOfOperand(op, a.bufferIndex) == i && a.read)
        writeOnly = false;
    if (writeOnly) {
      buffers.bytes.push_back(poisonBytes(sizes[i]));
      continue;
    }
    std::vector<float> f = randomFloats((sizes[i] + 3) / 4, rng);
    std::vector<uint8_t> b = floatBytes(f);
    b.resize(sizes[i]);
    buffers.bytes.push_back(std::move(b));
  }
  if (op.kind == OpKind::QuantizedMatmul) {
    std::vector<uint8_t> w = randomWeights(op.dtype, op.ints[0], op.ints[1], rng);
    std::memcpy(buffers.bytes[0].data(), w.data(), w.size());
  }
  return buffers;
}

/// Runs `plan` over `buffers` with `params`.
inline absl::Status runPlan(Plan &plan, OpBuffers &buffers, std::vector<uint64_t> params = {}) {
  std::vector<uint8_t *> data = buffers.data();
  std::vector<BufferHandle> handles;
  for (size_t i = 0; i < data.size(); ++i)
    handles.push_back(Trace::handleOfSlot(uint32_t(i)));
  PlanArgs args{data, params, {}, handles};
  return plan.run(args);
}

/// Runs the reference kernel of `op` (slot handles) over `buffers`.
inline void runReference(const OpCall &op, OpBuffers &buffers) {
  executeReference(op, [&](BufferHandle h) { return buffers.bytes[Trace::slotOf(h)].data(); });
}

/// Compares `out` with `ref` (same op, same starting bytes): written f32 ranges by NMSE, NaN where
/// the reference's are (bytes exactly for the copies), every other byte exactly.
inline void expectSameResults(const OpCall &op, const OpBuffers &out, const OpBuffers &ref,
                              const std::string &what, double tolerance = kF32Tolerance) {
  AccessList acc = *opAccesses(op);
  bool isCopy = op.kind == OpKind::CopyBuffer || op.kind == OpKind::CopyBufferOffset;
  for (size_t i = 0; i < out.bytes.size(); ++i) {
    const std::vector<uint8_t> &o = out.bytes[i], &r = ref.bytes[i];
    ASSERT_EQ(o.size(), r.size());
    std::vector<bool> written(o.size(), false);
    for (const BufferAccess &a : acc) {
      if (slotOfOperand(op, a.bufferIndex) != i || !a.write || isCopy)
        continue;
      std::vector<float> of = bytesFloats({o.data() + a.offset, a.size});
      std::vector<float> rf = bytesFloats({r.data() + a.offset, a.size});
      EXPECT_TRUE(nmseWithinMatchingNaN<float>(of, rf, tolerance)) << what << ", buffer " << i;
      for (uint64_t k = a.offset; k < a.offset + a.size; ++k)
        written[k] = true;
    }
    for (size_t k = 0; k < o.size(); ++k) {
      if (written[k] || o[k] == r[k])
        continue;
      ADD_FAILURE() << what << ": buffer " << i << " byte " << k << " is " << int(o[k])
                    << ", expected " << int(r[k]);
      break;
    }
  }
}

/// Compiles `op` (with `params` as its parameter slots), runs it and the reference on equal
/// random buffers, and compares. Returns the plan for further runs.
inline std::unique_ptr<Plan> checkOp(codegen::CpuCompiler &compiler, const OpCall &op,
                                     const std::string &what, uint32_t seed = 1,
                                     const std::vector<uint8_t> &paramIndices = {},
                                     double tolerance = kF32Tolerance) {
  std::mt19937 rng(seed);
  std::vector<uint64_t> sizes = fittingSizes(op);
  Trace trace = singleOpTrace(op, sizes);
  std::vector<IntSlot> slots;
  std::vector<uint64_t> params;
  for (uint8_t i : paramIndices) {
    slots.push_back({0, i});
    params.push_back(op.ints[i]);
  }
  absl::StatusOr<std::unique_ptr<Plan>> plan = compiler.compile(trace, slots);
  EXPECT_TRUE(plan.ok()) << what << ": " << plan.status();
  if (!plan.ok())
    return nullptr;
  OpBuffers out = makeBuffers(op, sizes, rng);
  OpBuffers ref = out;
  absl::Status status = runPlan(**plan, out, params);
  EXPECT_TRUE(status.ok()) << what << ": " << status;
  runReference(op, ref);
  expectSameResults(op, out, ref, what, tolerance);
  return std::move(*plan);
}

} // namespace sinter::test

#endif // SINTER_TESTS_UNIT_CODEGEN_KERNELHARNESS_H
