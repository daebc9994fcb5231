// SpirvFusedKernelTest.cpp - the fused SPIR-V kernels (rms_norm prologues, element-wise, rope and
// cache-copy epilogues, sibling and stacked products, attention over heads) on the machine's
// Vulkan device against executeReference of their members, under the Khronos validation layer;
// part of the SpirvKernelTest binary and suite (fixture: SpirvKernelFixture.h).
#include "tests/unit/spirv/SpirvKernelFixture.h"

namespace sinter::test {
namespace {

TEST_F(SpirvKernelTest, FusedRmsNormQuantizedMatmul) {
  // rms_norm(x=0, g=1, xn=2) -> quantized_matmul(W=3, xn=2, out=4), with and without split
  // blocks (Q4_0, Q8_0), then split with int8 x, at an even and an odd number of blocks per row.
  for (int schedule : {0, 1, 2}) {
    const bool split = schedule >= 1;
    split_ = split;
    intDot_ = schedule == 2;
    for (DType dtype : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16})
      for (uint32_t nCols : {256u, 1024u, 96u * 32u + 32u}) {
        uint32_t rows = 70; // 64 or more: int8 x where the schedule has it
        if (nCols % dtypeInfo(dtype).blockSize != 0)
          continue;
        checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), nCols, 1e-5f),
                    ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, nCols, dtype)},
                   1, {2, 4},
                   std::string("rms_norm -> quantized_matmul ") + dtypeName(dtype) + " " +
                       str(nCols) + (split ? " split" : "") + (intDot_ ? " int8 x" : ""));
      }
  }
  split_ = intDot_ = true;
}

TEST_F(SpirvKernelTest, FusedQuantizedMatmulEpilogues) {
  // Residual: quantized_matmul(W=0, x=1, y=2) -> add(y=2, residual=3, out=4).
  for (int schedule : {0, 1, 2}) {
    const bool split = schedule >= 1;
    split_ = split;
    intDot_ = schedule == 2;
    checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 70, 512 + 32 * split, DType::Q4_0),
                ops::add(slot(2), slot(3), slot(4), 70)},
               0, {2, 4},
               std::string("quantized_matmul -> add") + (split ? " split" : "") +
                   (intDot_ ? " int8 x" : ""));
  }
  split_ = intDot_ = true;
  // SwiGLU's tail on the gate: silu(gate) * up.
  checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 70, 256, DType::Q6_K),
              ops::silu(slot(2), slot(3), 70), ops::elementMul(slot(3), slot(4), slot(5), 70)},
             0, {2, 3, 5}, "quantized_matmul -> silu -> element_mul");
  // Norm, product and residual in one kernel.
  checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 512, 1e-6f),
              ops::quantizedMatmul(slot(3), slot(2), slot(4), 40, 512, DType::Q8_0),
              ops::add(slot(4), slot(5), slot(6), 40)},
             1, {2, 4, 6}, "rms_norm -> quantized_matmul -> add");
}

// KernelSpec::earlyInputs: the epilogue's second inputs loaded at the kernel's start, for each
// schedule, a partial last workgroup (1000 rows), the in-place residual (add's out is its second
// input), the norm prologue, SwiGLU's element_mul, and a capped grid (groups=5, where the loads
// stay after the reduction).
TEST_F(SpirvKernelTest, FusedEpiloguesLoadTheirSecondInputsEarly) {
  for (int schedule : {0, 1, 2}) {
    split_ = schedule >= 1;
    intDot_ = schedule == 2;
    const std::string how = std::string(split_ ? " split" : "") + (intDot_ ? " int8 x" : "");
    for (uint32_t rows : {70u, 1000u}) {
      const std::string shape = " " + str(rows) + " rows" + how;
      earlyInputs_ = 0b10;
      checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, 512, DType::Q4_0),
                  ops::add(slot(2), slot(3), slot(4), rows)},
                 0, {2, 4}, "early: quantized_matmul -> add" + shape);
      checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, 512, DType::Q8_0),
                  ops::add(slot(2), slot(3), slot(3), rows)},
                 0, {2}, "early: quantized_matmul -> in-place residual add" + shape);
      earlyInputs_ = 0b100;
      checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 512, 1e-6f),
                  ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, 512, DType::Q4_0),
                  ops::add(slot(4), slot(5), slot(6), rows)},
                 1, {2, 4, 6}, "early: rms_norm -> quantized_matmul -> add" + shape);
      checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, 256, DType::Q4_0),
                  ops::silu(slot(2), slot(3), rows),
                  ops::elementMul(slot(3), slot(4), slot(5), rows)},
                 0, {2, 3, 5}, "early: quantized_matmul -> silu -> element_mul" + shape);
    }
  }
  groups_ = 5;
  earlyInputs_ = 0b10;
  checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 700, 512, DType::Q4_0),
              ops::add(slot(2), slot(3), slot(3), 700)},
             0, {2}, "early, groups=5: quantized_matmul -> in-place residual add");
  groups_ = 0;
  earlyInputs_ = 0;
  split_ = intDot_ = true;
}

// Gate and up in one kernel (codegen::hasSiblingProduct): rms_norm(x=0, g=1, xn=2) ->
// gate(W=3 -> 4), up(W=5 -> 6) -> silu(4 -> 7) -> element_mul(7, 6 -> 8), every output stored.
// Split blocks with f32 x and with int8 x (from 64 rows; 40 rows keep f32 x in the same kernel),
// an even and an odd number of blocks a row, a partial last workgroup.
TEST_F(SpirvKernelTest, FusedSiblingProducts) {
  for (int schedule : {1, 2, 3}) {
    split_ = true;
    intDot_ = schedule >= 2;
    laneWords_ = schedule == 3 ? 2 : 0; // int8 x: the default (4 words a lane), then words=2
    for (DType dtype : {DType::Q4_0, DType::Q8_0})
      for (uint32_t cols : {256u, 96u * 32u + 32u})
        for (uint32_t rows : {40u, 70u, 1000u}) {
          std::string what = std::string("rms_norm -> ") + dtypeName(dtype) +
                             " gate and up -> silu -> element_mul, " + str(rows) + "x" + str(cols) +
                             (intDot_ ? " int8 x words " + str(laneWords_) : " split");
          checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), cols, 1e-5f),
                      ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, dtype),
                      ops::quantizedMatmul(slot(5), slot(2), slot(6), rows, cols, dtype),
                      ops::silu(slot(4), slot(7), rows),
                      ops::elementMul(slot(7), slot(6), slot(8), rows)},
                     1, {2, 4, 6, 7, 8}, what);
        }
  }
  split_ = intDot_ = true;
  laneWords_ = 0;
}

// The tails of the projections that feed the KV cache (runtime/vulkan/LaunchGroups.cpp): rope of
// the product's rows only (rope(q = out, k = out, n_heads_k = 0), as the runtime launches it),
// then a copy of the rotated rows into a cache at a byte offset, aligned or not (neighbouring
// rows then share words: the bytes around the range must not change). pos and dst_offset are
// run-time integers, as in a decode.
TEST_F(SpirvKernelTest, FusedRopeAndCacheCopyEpilogues) {
  const uint8_t posParam = 0b1, dstParam = 0b10;
  for (int schedule : {0, 1, 2, 3}) {
    split_ = schedule >= 1;
    intDot_ = schedule >= 2;
    laneWords_ = schedule == 3 ? 1 : 0; // int8 x: the default (4 words a lane), then words=1
    std::string how = split_ ? (intDot_ ? " int8 x words " + str(laneWords_) : " split") : " pairs";
    for (uint32_t pos : {0u, 7u, 300u})
      for (uint32_t dst : {0u, 4u * 192u, 6u, 4u * 192u + 1u}) {
        const uint32_t heads = 3, dim = 64, rows = heads * dim, cols = 256;
        std::string what = "rms_norm -> Q4_0 product -> rope -> cache copy, pos " + str(pos) +
                           " dst_offset " + str(dst) + how;
        checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), cols, 1e-5f),
                    ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, DType::Q4_0),
                    ops::rope(slot(4), slot(4), pos, dim, 10000.0f, heads, 0),
                    ops::copyBufferOffset(slot(4), slot(5), 0, dst, 4 * rows)},
                   1, {2, 4}, what, {0, 0, posParam, dstParam});
      }
    // Formats whose schedule has one row a cluster take two under a rope epilogue.
    for (DType dtype : {DType::F32, DType::F16, DType::Q4_K})
      checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 256, 1e-5f),
                  ops::quantizedMatmul(slot(3), slot(2), slot(4), 192, 256, dtype),
                  ops::rope(slot(4), slot(4), 33, 64, 10000.0f, 3, 0),
                  ops::copyBufferOffset(slot(4), slot(5), 0, 10, 4 * 192)},
                 1, {2, 4},
                 std::string("rms_norm -> ") + dtypeName(dtype) + " product -> rope" + how,
                 {0, 0, posParam, dstParam});
    // F32 rows of 250 columns: the columns past the last whole pseudo-block, on two rows.
    checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 250, 1e-5f),
                ops::quantizedMatmul(slot(3), slot(2), slot(4), 64, 250, DType::F32),
                ops::rope(slot(4), slot(4), 9, 16, 10000.0f, 4, 0)},
               1, {2, 4}, "rms_norm -> F32 product of 250 columns -> rope" + how, {0, 0, posParam});
    // Rope alone (Q's tail, a Q8_0 product without a norm) and the copy alone (V's tail).
    checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 128, 512, DType::Q8_0),
                ops::rope(slot(2), slot(2), 4095, 128, 500000.0f, 1, 0)},
               0, {2}, "Q8_0 product -> rope, head_dim 128" + how, {0, posParam});
    checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 70, 256, DType::Q4_0),
                ops::copyBufferOffset(slot(2), slot(3), 0, 4 * 70 * 5 + 2, 4 * 70)},
               0, {2}, "Q4_0 product -> cache copy" + how, {0, dstParam});
  }
  split_ = intDot_ = true;
  laneWords_ = 0;
}

// Q, K and V after one rms_norm as one stacked launch (KernelSpec::stackedProducts), each with
// its tail as the runtime plans it: Q rotated, K rotated and copied into the K cache, V copied
// into the V cache. Grouped-query shapes (K and V fewer rows than Q, not a whole workgroup's
// tile), every schedule, Q4_0 and Q8_0, a capped grid; the norm stored once.
TEST_F(SpirvKernelTest, StackedProductsWithTheirTails) {
  const uint8_t posParam = 0b1, dstParam = 0b10;
  stacked_ = true;
  for (int schedule : {0, 1, 2, 3, 4}) {
    split_ = schedule >= 1;
    intDot_ = schedule >= 2;
    laneWords_ = schedule == 3 ? 1 : 0;
    groups_ = schedule == 4 ? 4 : 0; // int8 x with at most 4 workgroups a product
    std::string how = split_ ? (intDot_ ? " int8 x words " + str(laneWords_) +
                                              (groups_ ? " groups " + str(groups_) : "")
                                        : " split")
                             : " pairs";
    // Every shape on the default schedule (int8 x, 4 words a lane), one on the others.
    std::vector<std::pair<DType, uint32_t>> shapes{{DType::Q4_0, 2}};
    if (schedule == 2)
      shapes = {{DType::Q4_0, 1}, {DType::Q4_0, 4}, {DType::Q8_0, 2}};
    for (auto [dtype, kvHeads] : shapes) {
      const uint32_t heads = 4, dim = 64, cols = 256, pos = 37;
      const uint32_t rows = heads * dim, kvRows = kvHeads * dim;
      std::string what = std::string("rms_norm -> stacked ") + dtypeName(dtype) + " Q " +
                         str(rows) + ", K and V " + str(kvRows) + " rows" + how;
      checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), cols, 1e-5f),
                  ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, dtype),
                  ops::rope(slot(4), slot(4), pos, dim, 10000.0f, heads, 0),
                  ops::quantizedMatmul(slot(5), slot(2), slot(6), kvRows, cols, dtype),
                  ops::rope(slot(6), slot(6), pos, dim, 10000.0f, kvHeads, 0),
                  ops::copyBufferOffset(slot(6), slot(7), 0, 4 * kvRows * 3, 4 * kvRows),
                  ops::quantizedMatmul(slot(8), slot(2), slot(9), kvRows, cols, dtype),
                  ops::copyBufferOffset(slot(9), slot(10), 0, 4 * kvRows * 5 + 2, 4 * kvRows)},
                 1, {2, 4, 6, 9}, what, {0, 0, posParam, 0, posParam, dstParam, 0, dstParam});
    }
    if (schedule != 2)
      continue;
    // Without tails, and two products only.
    checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 512, 1e-5f),
                ops::quantizedMatmul(slot(3), slot(2), slot(4), 96, 512, DType::Q4_0),
                ops::quantizedMatmul(slot(5), slot(2), slot(6), 200, 512, DType::Q4_0)},
               1, {2, 4, 6}, "rms_norm -> stacked Q4_0 products of 96 and 200 rows" + how);
  }
  stacked_ = false;
  split_ = intDot_ = true;
  laneWords_ = 0;
  groups_ = 0;
}

// The norm prologue over rows at the ends of f32's range (tests/support/RangeRows.h) in every
// schedule of the product: pairs (fast Q4_0, generic Q4_K, scalar F32), split blocks with f32 x,
// int8 x (with a capped grid too), workgroup rows with f32 and int8 x; then gate and up as
// sibling products, and Q, K, V stacked with their rope and cache-copy tails. The reference's
// results wherever they are finite and NaN where they are NaN, the normalized vector included.
TEST_F(SpirvKernelTest, FusedRmsNormRange) {
  struct Schedule {
    const char *name;
    bool split, intDot;
    uint32_t groups, workgroupRows;
    std::vector<DType> dtypes;
  };
  const std::vector<Schedule> schedules = {
      {"pairs", false, false, 0, 0, {DType::F32, DType::Q4_0, DType::Q4_K}},
      {"split", true, false, 0, 0, {DType::Q4_0, DType::Q8_0}},
      {"int8 x", true, true, 0, 0, {DType::Q4_0, DType::Q8_0}},
      {"int8 x, groups=3", true, true, 3, 0, {DType::Q4_0}},
      {"wgrows=4", true, false, 0, 4, {DType::Q8_0}},
      {"wgrows=4 int8 x", true, true, 0, 4, {DType::Q4_0}},
  };
  const uint32_t cols = 1024, rows = 70;
  for (const RangeRow &row : rangeRows()) {
    normInput_ = rangeRowValues(row.kind, cols);
    const std::string of = std::string(" of a ") + row.name + " row";
    for (const Schedule &s : schedules) {
      split_ = s.split;
      intDot_ = s.intDot;
      groups_ = s.groups;
      workgroupRows_ = s.workgroupRows;
      for (DType dtype : s.dtypes)
        checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), cols, row.eps),
                    ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, dtype)},
                   1, {2, 4},
                   std::string("rms_norm -> ") + dtypeName(dtype) + " product, " + s.name + of);
    }
    split_ = intDot_ = true;
    groups_ = workgroupRows_ = 0;
    checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), cols, row.eps),
                ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, DType::Q4_0),
                ops::quantizedMatmul(slot(5), slot(2), slot(6), rows, cols, DType::Q4_0),
                ops::silu(slot(4), slot(7), rows),
                ops::elementMul(slot(7), slot(6), slot(8), rows)},
               1, {2, 4, 6, 7, 8}, "rms_norm -> gate and up -> silu -> element_mul" + of);
    stacked_ = true;
    const uint32_t dim = 64, pos = 5;
    checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), cols, row.eps),
                ops::quantizedMatmul(slot(3), slot(2), slot(4), 4 * dim, cols, DType::Q8_0),
                ops::rope(slot(4), slot(4), pos, dim, 10000.0f, 4, 0),
                ops::quantizedMatmul(slot(5), slot(2), slot(6), 2 * dim, cols, DType::Q8_0),
                ops::rope(slot(6), slot(6), pos, dim, 10000.0f, 2, 0),
                ops::copyBufferOffset(slot(6), slot(7), 0, 4 * 2 * dim, 4 * 2 * dim),
                ops::quantizedMatmul(slot(8), slot(2), slot(9), 2 * dim, cols, DType::Q8_0),
                ops::copyBufferOffset(slot(9), slot(10), 0, 4 * 2 * dim + 2, 4 * 2 * dim)},
               1, {2, 4, 6, 9}, "rms_norm -> stacked Q, K, V with their tails" + of);
    stacked_ = false;
  }
  normInput_.clear();
}

TEST_F(SpirvKernelTest, AttentionOverHeads) {
  // One workgroup a head (attnsplit=1), then the default split.
  attentionSplits_ = 1;
  checkAttention(4, 2, 8, 5, "4 heads (2 per K/V head), head_dim 8, 5 positions");
  checkAttention(8, 1, 64, 257, "8 heads, head_dim 64, 257 positions");
  checkAttention(3, 3, 128, 1, "3 heads sharing K/V, head_dim 128, 1 position");
  checkAttention(2, 1, 48, 40, "2 heads, head_dim 48 (lanes past it idle), 40 positions");
  // attnwg: two subgroups per workgroup, so each takes many chunks of positions.
  attentionWorkgroup_ = 2 * target().subgroupSize;
  checkAttention(8, 4, 64, 257, "8 heads, head_dim 64, 257 positions, 2 subgroups");
  attentionWorkgroup_ = 0;
  // Split over the positions (attnsplit=N): shares that are empty (more shares than chunks of 4
  // positions), uneven and many.
  for (uint32_t splits : {0u, 2u, 4u, 16u}) {
    attentionSplits_ = splits;
    std::string s = ", split " + (splits ? str(splits) : "(default)");
    checkAttention(4, 2, 8, 5, "4 heads (2 per K/V head), head_dim 8, 5 positions" + s);
    checkAttention(8, 1, 64, 257, "8 heads, head_dim 64, 257 positions" + s);
    checkAttention(3, 3, 128, 1, "3 heads sharing K/V, head_dim 128, 1 position" + s);
  }
  attentionWorkgroup_ = 2 * target().subgroupSize;
  attentionSplits_ = 4;
  checkAttention(8, 4, 64, 257, "8 heads, head_dim 64, 257 positions, 2 subgroups, split 4");
  attentionWorkgroup_ = 0;
  // Scores the runtime knows to be dead (kAttnStoreScores = 0): out the same, scores untouched,
  // with one workgroup a head and split.
  for (uint32_t splits : {1u, 0u}) {
    attentionSplits_ = splits;
    checkAttention(8, 2, 64, 257, "dead scores, split " + str(splits), /*storeScores=*/false);
    checkAttention(4, 2, 8, 5, "dead scores, 5 positions, split " + str(splits), false);
  }
  attentionSplits_ = 0;
}

} // namespace
} // namespace sinter::test
