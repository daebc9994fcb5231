// SpirvKernelTest.cpp - runs every generated single-op SPIR-V kernel (and the parameter buffer)
// on the machine's Vulkan device (lavapipe in CI) against executeReference on random inputs with
// poisoned outputs, under the Khronos validation layer: any warning or error it reports fails the
// test. The fused kernels are in SpirvFusedKernelTest.cpp; the fixture in SpirvKernelFixture.h.
#include "tests/unit/spirv/SpirvKernelFixture.h"

namespace sinter::test {

VkRunner *SpirvKernelTest::runner_ = nullptr;
std::string *SpirvKernelTest::skipReason_ = nullptr;
std::map<std::string, SpirvKernel> *SpirvKernelTest::kernels_ = nullptr;

namespace {

TEST_F(SpirvKernelTest, Matmul) {
  for (auto [m, n, k] : std::vector<std::array<uint32_t, 3>>{
           {1, 1, 1}, {1, 16, 16}, {3, 37, 19}, {4, 64, 128}, {2, 15, 300}})
    check(ops::matmul(slot(0), slot(1), slot(2), m, n, k),
          "matmul " + str(m) + "x" + str(n) + "x" + str(k));
}

TEST_F(SpirvKernelTest, Softmax) {
  for (uint32_t size : {1u, 7u, 100u, 1000u, 4099u}) {
    check(ops::softmax(slot(0), slot(1), size), "softmax " + str(size));
    check(ops::softmax(slot(0), slot(0), size), "in-place softmax " + str(size));
  }
}

TEST_F(SpirvKernelTest, RmsNorm) {
  for (uint32_t size : {1u, 17u, 288u, 4096u}) {
    check(ops::rmsNorm(slot(0), slot(1), slot(2), size, 1e-5f), "rms_norm " + str(size));
    check(ops::rmsNorm(slot(0), slot(1), slot(0), size, 1e-6f), "in-place rms_norm " + str(size));
  }
}

// Rows at the ends of f32's range (tests/support/RangeRows.h): the reference's results wherever
// they are finite, NaN where they are NaN; in place too.
TEST_F(SpirvKernelTest, RmsNormRange) {
  for (const RangeRow &row : rangeRows())
    for (uint32_t size : {1000u, 4096u}) {
      normInput_ = rangeRowValues(row.kind, size);
      std::string what = std::string("rms_norm of a ") + row.name + " row of " + str(size);
      check(ops::rmsNorm(slot(0), slot(1), slot(2), size, row.eps), what);
      check(ops::rmsNorm(slot(0), slot(1), slot(0), size, row.eps), "in-place " + what);
    }
  normInput_.clear();
}

TEST_F(SpirvKernelTest, Rope) {
  for (uint32_t pos : {0u, 1u, 17u, 4095u, 100000u})
    for (uint32_t headDim : {2u, 64u, 128u})
      check(ops::rope(slot(0), slot(1), pos, headDim, 10000.0f, 6, 2),
            "rope pos " + str(pos) + " head_dim " + str(headDim), /*paramMask=*/0b1);
  check(ops::rope(slot(0), slot(1), 33, 64, 500000.0f, 32, 8), "rope llama3 base");
  check(ops::rope(slot(0), slot(1), 5, 64, 10000.0f, 4, 0), "rope q only");
}

TEST_F(SpirvKernelTest, Elementwise) {
  for (uint32_t size : {1u, 63u, 64u, 1000u, 70000u}) {
    check(ops::silu(slot(0), slot(1), size), "silu " + str(size));
    check(ops::elementMul(slot(0), slot(1), slot(2), size), "element_mul " + str(size));
    check(ops::add(slot(0), slot(1), slot(2), size), "add " + str(size));
    check(ops::add(slot(0), slot(1), slot(0), size), "in-place add " + str(size));
  }
}

TEST_F(SpirvKernelTest, Copies) {
  for (uint64_t size : {0ull, 1ull, 4ull, 7ull, 1030ull, 5000ull})
    check(ops::copyBuffer(slot(0), slot(1), size), "copy_buffer " + str(size));
  // Several chunks of 2048 words, whole words and not.
  for (auto [so, dst, size] : std::vector<std::array<uint64_t, 3>>{{0, 0, 16},
                                                                   {6, 1027, 513},
                                                                   {3, 1, 2},
                                                                   {1, 6, 3000},
                                                                   {4096, 8, 4096},
                                                                   {0, 0, 40000},
                                                                   {8192, 4, 36004},
                                                                   {3, 5, 30001}})
    check(ops::copyBufferOffset(slot(0), slot(1), so, dst, size),
          "copy_buffer_offset " + str(so) + " " + str(dst) + " " + str(size));
  // One buffer, overlapping ranges both ways: memmove.
  for (auto [so, dst, size] : std::vector<std::array<uint64_t, 3>>{{0, 5, 3000},
                                                                   {5, 0, 3000},
                                                                   {2, 3, 1},
                                                                   {100, 96, 2000},
                                                                   {96, 101, 2000},
                                                                   {0, 4096, 40000},
                                                                   {4096, 0, 40000},
                                                                   {1, 4099, 30001},
                                                                   {4100, 4, 30000}})
    check(ops::copyBufferOffset(slot(0), slot(0), so, dst, size),
          "overlapping copy_buffer_offset " + str(so) + " " + str(dst) + " " + str(size));
}

TEST_F(SpirvKernelTest, AttnScore) {
  check(ops::attnScore(slot(0), slot(1), slot(2), 64, 17, 64, 128, 256), "attn_score 64x17");
  check(ops::attnScore(slot(0), slot(1), slot(2), 48, 1, 0, 0, 48), "attn_score 48x1");
  check(ops::attnScore(slot(0), slot(1), slot(2), 128, 300, 0, 128, 512), "attn_score 128x300",
        /*paramMask=*/0b11110);
  check(ops::attnScore(slot(0), slot(1), slot(2), 5, 9, 3, 2, 11), "attn_score odd head_dim",
        /*paramMask=*/0b11111);
}

TEST_F(SpirvKernelTest, AttnValue) {
  check(ops::attnValue(slot(0), slot(1), slot(2), 64, 17, 128, 256, 64), "attn_value 64x17");
  check(ops::attnValue(slot(0), slot(1), slot(2), 100, 3, 0, 100, 0), "attn_value 100x3");
  check(ops::attnValue(slot(0), slot(1), slot(2), 128, 300, 128, 512, 128), "attn_value 128x300");
}

TEST_F(SpirvKernelTest, QuantizedMatmulEveryDType) {
  for (uint32_t id = 0; id < 40; ++id) {
    const DTypeInfo *info = lookupDType(id);
    if (!info || info->support != DTypeSupport::Supported)
      continue;
    uint32_t block = info->blockSize == 1 ? 32 : info->blockSize;
    std::vector<uint32_t> cols = {block, 4 * block, 8 * block + (info->blockSize == 1 ? 5 : 0)};
    for (uint32_t nCols : cols)
      for (uint32_t rows : {1u, 7u, 33u}) {
        std::string what =
            std::string("quantized_matmul ") + info->name + " " + str(rows) + "x" + str(nCols);
        check(ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, nCols, info->dtype), what);
        if (rows == 7)
          check(ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, nCols, info->dtype),
                what + " (n_cols at run time)", /*paramMask=*/0b11);
      }
  }
}

TEST_F(SpirvKernelTest, QuantizedMatmulScheduleOverrides) {
  // The SINTER_VK_QMATMUL tuning knobs change the schedule, never the result.
  // decode=generic takes Q4_0 and Q8_0 through Dequant.h's decoder instead of the fast one.
  struct Knobs {
    uint32_t rows, workgroup, step;
    bool generic = false;
    bool split = true;
    uint32_t unroll = 0;
    bool dot = false;
    bool prefetch = true;
    uint32_t dotUnroll = 0;
  };
  // The pair-per-lane schedule (split off), the split one, then split with int8 x (where the
  // device has integer dot products; f32 x elsewhere).
  const uint32_t s = target().subgroupSize;
  for (Knobs k : {Knobs{1, 0, 0, false, false},
                  Knobs{4, 0, 0, false, false},
                  Knobs{8, 2 * s, 0, false, false},
                  Knobs{0, 0, 4, false, false},
                  Knobs{4, 0, 4, false, false},
                  Knobs{2, 4 * s, 0, false, false},
                  Knobs{1, s, 4, false, false},
                  Knobs{0, 0, 0, true, false},
                  Knobs{4, 0, 4, true, false},
                  Knobs{0, 0, 0},
                  Knobs{1, 0, 0},
                  Knobs{4, 0, 0},
                  Knobs{8, 2 * s, 0},
                  Knobs{0, 0, 0, false, true, 2},
                  Knobs{2, 0, 0, false, true, 3},
                  Knobs{4, 0, 0, false, true, 4},
                  Knobs{0, 0, 0, false, true, 0, true},
                  Knobs{1, 0, 0, false, true, 0, true},
                  Knobs{4, 2 * s, 0, false, true, 0, true},
                  Knobs{2, s, 0, false, true, 0, true},
                  Knobs{0, 0, 0, false, true, 0, true, false},
                  Knobs{0, 0, 0, false, true, 0, true, false, 1},
                  Knobs{2, 0, 0, false, true, 0, true, false, 3},
                  Knobs{1, 0, 0, false, true, 0, true, true, 16}}) {
    SpirvTarget t = target();
    t.qmatmulRows = k.rows;
    t.qmatmulWorkgroup = k.workgroup;
    t.qmatmulBlocksPerStep = k.step;
    t.qmatmulGenericDecode = k.generic;
    t.qmatmulSplitBlocks = k.split;
    t.qmatmulUnroll = k.unroll;
    t.qmatmulIntDot = k.dot;
    t.qmatmulPrefetch = k.prefetch;
    t.qmatmulDotUnroll = k.dotUnroll;
    std::string knobs =
        "rows " + str(k.rows) + " wg " + str(k.workgroup) + " step " + str(k.step) +
        (k.generic ? " decode generic" : "") + (k.split ? " split unroll " + str(k.unroll) : "") +
        (k.dot ? " int8 x unroll " + str(k.dotUnroll) : "") + (k.prefetch ? "" : " no prefetch");
    for (DType dtype : {DType::Q4_0, DType::Q8_0, DType::Q5_0})
      for (uint32_t rows : {1u, 37u, 130u})
        check(ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, 1024, dtype),
              std::string("quantized_matmul ") + dtypeName(dtype) + " " + str(rows) + "x1024, " +
                  knobs,
              0, rows, &t);
  }
}

TEST_F(SpirvKernelTest, QuantizedMatmulIntDot) {
  if (!runner_->intDot())
    GTEST_SKIP() << runner_->deviceName() << " has no integer dot products";
  // Q4_0 and Q8_0 matrices of 64 rows or more quantize x to int8 and use SDot/SUDot (5e-4),
  // fewer rows keep f32 x in the same kernel (1e-7); 97 blocks a row make unaligned rows, 344
  // blocks (11008 columns) several passes; x too large for workgroup memory keeps f32.
  for (DType dtype : {DType::Q4_0, DType::Q8_0})
    for (uint32_t nCols : {256u, 3104u, 11008u})
      for (uint32_t rows : {1u, 63u, 64u, 130u}) {
        if (nCols > 4096 && rows != 64)
          continue;
        OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, nCols, dtype);
        absl::StatusOr<SpirvKernel> k =
            codegen::buildSpirvKernel(codegen::singleOpSpec(op, 0), target());
        ASSERT_TRUE(k.ok()) << k.status();
        EXPECT_TRUE(usesIntDot(k->words)) << dtypeName(dtype) << " " << nCols;
        check(op, std::string("int8 x ") + dtypeName(dtype) + " " + str(rows) + "x" + str(nCols), 0,
              rows, nullptr, rows < 64 ? kF32Tolerance : kQuantizedActivationTolerance);
      }
  SpirvTarget small = target();
  small.maxSharedMemoryBytes = 4096;
  OpCall wide = ops::quantizedMatmul(slot(0), slot(1), slot(2), 70, 4096, DType::Q4_0);
  absl::StatusOr<SpirvKernel> k = codegen::buildSpirvKernel(codegen::singleOpSpec(wide, 0), small);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE(usesIntDot(k->words)) << "4096 columns need 5 KB of workgroup memory";
  check(wide, "f32 x past the workgroup memory", 0, 1, &small);
}

TEST_F(SpirvKernelTest, QuantizedMatmulLaneWords) {
  if (!runner_->intDot())
    GTEST_SKIP() << runner_->deviceName() << " has no integer dot products (words=N is int8 x)";
  // words=N: N consecutive quant words of a block a lane (4 by default; 1 and 2 the narrower
  // schedules, each built against another setting to show the knob changes the kernel). Aligned
  // rows (256, 11008 columns) and
  // unaligned ones (97 blocks), one pass and several, partial last tiles, with and without the
  // prefetch, two rows a cluster (a rope epilogue's) and a small unroll (blocks past the end).
  struct Case {
    uint32_t words, rows, dotUnroll;
    bool prefetch;
    bool window = true;
  };
  for (Case c : {Case{1, 0, 0, false}, Case{2, 0, 0, false}, Case{4, 2, 0, true},
                 Case{2, 2, 3, true}, Case{4, 0, 0, false, false}})
    for (DType dtype : {DType::Q4_0, DType::Q8_0})
      for (uint32_t nCols : {256u, 3104u, 11008u})
        for (uint32_t rows : {64u, 130u}) {
          if (nCols > 4096 && rows != 64)
            continue;
          SpirvTarget t = target();
          t.qmatmulLaneWords = c.words;
          t.qmatmulRows = c.rows;
          t.qmatmulDotUnroll = c.dotUnroll;
          t.qmatmulPrefetch = c.prefetch;
          t.qmatmulBlockWindow = c.window;
          OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, nCols, dtype);
          // (window=0 changes only a whole block a lane: Q4_0's 4 words, not half a Q8_0 block)
          if (nCols == 256 && rows == 64 && (c.window || dtype == DType::Q4_0)) {
            absl::StatusOr<SpirvKernel> lane =
                codegen::buildSpirvKernel(codegen::singleOpSpec(op, 0), t);
            ASSERT_TRUE(lane.ok()) << lane.status();
            SpirvTarget one = t;
            one.qmatmulLaneWords = c.words == 1 ? 4 : 1;
            if (!c.window) { // the same words a lane, d loaded apart
              one.qmatmulLaneWords = c.words;
              one.qmatmulBlockWindow = true;
            }
            absl::StatusOr<SpirvKernel> base =
                codegen::buildSpirvKernel(codegen::singleOpSpec(op, 0), one);
            ASSERT_TRUE(base.ok()) << base.status();
            EXPECT_TRUE(usesIntDot(lane->words));
            EXPECT_NE(lane->words, base->words) << "words=" << c.words << " changed nothing";
          }
          check(op,
                std::string("words=") + str(c.words) + (c.window ? "" : " window=0") + " rows " +
                    str(c.rows) + " dotunroll " + str(c.dotUnroll) +
                    (c.prefetch ? " prefetch " : " ") + dtypeName(dtype) + " " + str(rows) + "x" +
                    str(nCols),
                0, rows, &t, kQuantizedActivationTolerance);
        }
}

TEST_F(SpirvKernelTest, QuantizedMatmulCappedGrid) {
  if (!runner_->intDot())
    GTEST_SKIP() << runner_->deviceName() << " has no integer dot products (groups=N is int8 x)";
  // groups=N: at most N workgroups, each quantizing x once and looping over tiles g, g + N, ...;
  // row counts that leave the last tile partial, a tile count below N, and the f32 path under 64
  // rows (one or two tiles) in the same kernel.
  groups_ = 5;
  for (DType dtype : {DType::Q4_0, DType::Q8_0})
    for (uint32_t rows : {1u, 64u, 130u, 1000u}) {
      OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, 1024, dtype);
      absl::StatusOr<SpirvKernel> k =
          codegen::buildSpirvKernel(codegen::singleOpSpec(op, 0), target());
      ASSERT_TRUE(k.ok()) << k.status();
      const int64_t ints[5] = {rows, 1024, static_cast<int64_t>(dtype), 0, 0};
      const uint64_t tiles = (rows + k->unitsPerGroup - 1) / k->unitsPerGroup;
      EXPECT_EQ(k->grid(ints)[0], std::min<uint64_t>(tiles, 5)) << rows << " rows";
      check(op, std::string("groups=5 ") + dtypeName(dtype) + " " + str(rows) + "x1024", 0, rows,
            nullptr, rows < 64 ? kF32Tolerance : kQuantizedActivationTolerance);
    }
  // The norm prologue's store is shared by the capped grid; the residual add on each tile.
  checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 1024, 1e-5f),
              ops::quantizedMatmul(slot(3), slot(2), slot(4), 700, 1024, DType::Q4_0)},
             1, {2, 4}, "groups=5 rms_norm -> quantized_matmul");
  checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 700, 512, DType::Q8_0),
              ops::add(slot(2), slot(3), slot(4), 700)},
             0, {2, 4}, "groups=5 quantized_matmul -> add");
  groups_ = 0;
}

TEST_F(SpirvKernelTest, QuantizedMatmulWorkgroupRows) {
  // wgrows=N: every invocation of a workgroup on the same N rows, x quantized per block as it is
  // loaded (int8 from 64 rows where the device has integer dot products, f32 below and with
  // dot=0); odd block counts (3104 columns: unaligned rows), several steps a row (11008), a
  // partial last workgroup, the norm prologue and the residual epilogue.
  for (bool dot : {true, false}) {
    intDot_ = dot;
    for (uint32_t n : {1u, 4u, 16u}) {
      workgroupRows_ = n;
      for (DType dtype : {DType::Q4_0, DType::Q8_0})
        for (uint32_t nCols : {1024u, 3104u, 11008u})
          for (uint32_t rows : {1u, 63u, 64u, 130u}) {
            if (nCols > 4096 && rows != 64)
              continue;
            OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, nCols, dtype);
            absl::StatusOr<SpirvKernel> k =
                codegen::buildSpirvKernel(codegen::singleOpSpec(op, 0), target());
            ASSERT_TRUE(k.ok()) << k.status();
            EXPECT_EQ(k->unitsPerGroup, n);
            const bool int8 = dot && runner_->intDot() && rows >= 64;
            check(op,
                  "wgrows=" + str(n) + (dot ? "" : " dot=0 ") + dtypeName(dtype) + " " + str(rows) +
                      "x" + str(nCols),
                  0, rows, nullptr, int8 ? kQuantizedActivationTolerance : kF32Tolerance);
          }
      checkFused({ops::rmsNorm(slot(0), slot(1), slot(2), 1024, 1e-5f),
                  ops::quantizedMatmul(slot(3), slot(2), slot(4), 70, 1024, DType::Q4_0)},
                 1, {2, 4}, "wgrows=" + str(n) + " rms_norm -> quantized_matmul");
      checkFused({ops::quantizedMatmul(slot(0), slot(1), slot(2), 70, 544, DType::Q8_0),
                  ops::add(slot(2), slot(3), slot(4), 70)},
                 0, {2, 4}, "wgrows=" + str(n) + " quantized_matmul -> add");
    }
  }
  workgroupRows_ = 0;
  intDot_ = true;
}

// SpirvTarget::paramsInBuffer: the integers come from a storage buffer bound last (what lets the
// runtime replay a command buffer with new integers), for every kind of kernel that has words.
TEST_F(SpirvKernelTest, IntegersFromAParameterBuffer) {
  paramsInBuffer_ = true;
  for (uint32_t pos : {0u, 17u, 4095u})
    check(ops::rope(slot(0), slot(1), pos, 64, 10000.0f, 6, 2), "rope pos " + str(pos),
          /*paramMask=*/0b1);
  check(ops::copyBufferOffset(slot(0), slot(1), 6, 1027, 513), "copy_buffer_offset",
        /*paramMask=*/0b111);
  check(ops::copyBufferOffset(slot(0), slot(0), 100, 96, 2000), "overlapping copy",
        /*paramMask=*/0b011);
  check(ops::softmax(slot(0), slot(1), 1000), "softmax", /*paramMask=*/0b1);
  check(ops::attnScore(slot(0), slot(1), slot(2), 128, 300, 0, 128, 512), "attn_score",
        /*paramMask=*/0b11110);
  for (DType dtype : {DType::Q4_0, DType::Q8_0, DType::F32})
    for (uint8_t mask : {0b00, 0b01, 0b11})
      check(ops::quantizedMatmul(slot(0), slot(1), slot(2), 33, 256, dtype),
            std::string("quantized_matmul ") + dtypeName(dtype) + " mask " + str(mask), mask);
  checkFused({ops::rmsNorm(slot(3), slot(4), slot(1), 256, 1e-5f),
              ops::quantizedMatmul(slot(0), slot(1), slot(2), 40, 256, DType::Q4_0),
              ops::add(slot(2), slot(5), slot(6), 40)},
             1, {1, 2, 6}, "rms_norm + quantized_matmul + add");
  checkAttention(8, 2, 64, 257, "attention over 8 heads, 257 positions");
  paramsInBuffer_ = false;
}

TEST_F(SpirvKernelTest, UnsupportedFusionIsUnimplemented) {
  codegen::KernelSpec spec =
      codegen::singleOpSpec(ops::quantizedMatmul(slot(0), slot(1), slot(2), 8, 64, DType::Q4_0), 0);
  spec.epilogue.push_back(codegen::shapeOf(ops::softmax(slot(2), slot(2), 8), 0));
  absl::StatusOr<SpirvKernel> k = codegen::buildSpirvKernel(spec, target());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << k.status();
  EXPECT_NE(k.status().message().find("a softmax epilogue"), std::string::npos) << k.status();
  // A rope epilogue needs both rows of a pair in one invocation: not with every invocation of a
  // workgroup on its own row (wgrows=N) ...
  spec = codegen::singleOpSpec(ops::quantizedMatmul(slot(0), slot(1), slot(2), 8, 256, DType::Q4_0),
                               0);
  spec.epilogue.push_back(codegen::shapeOf(ops::rope(slot(2), slot(2), 1, 8, 1e4f, 1, 0), 0));
  workgroupRows_ = 4;
  k = codegen::buildSpirvKernel(spec, target());
  workgroupRows_ = 0;
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << k.status();
  EXPECT_NE(k.status().message().find("pairs of rows"), std::string::npos) << k.status();
  // ... and nothing after the copy into the cache.
  spec =
      codegen::singleOpSpec(ops::quantizedMatmul(slot(0), slot(1), slot(2), 8, 64, DType::Q4_0), 0);
  spec.epilogue.push_back(codegen::shapeOf(ops::copyBufferOffset(slot(2), slot(3), 0, 0, 32), 0));
  spec.epilogue.push_back(codegen::shapeOf(ops::silu(slot(2), slot(4), 8), 0));
  k = codegen::buildSpirvKernel(spec, target());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << k.status();
  // A sibling product: only of the anchor's format and shape, with an element-wise member after
  // it, and only on the split schedule (the runtime then launches gate and up apart).
  auto sibling = [](DType gate, DType up, uint32_t upCols) {
    codegen::KernelSpec s =
        codegen::singleOpSpec(ops::quantizedMatmul(slot(0), slot(1), slot(2), 64, 256, gate), 0);
    s.epilogue.push_back(
        codegen::shapeOf(ops::quantizedMatmul(slot(3), slot(1), slot(4), 64, upCols, up), 0));
    s.epilogue.push_back(codegen::shapeOf(ops::silu(slot(2), slot(5), 64), 0));
    s.epilogue.push_back(codegen::shapeOf(ops::elementMul(slot(5), slot(4), slot(6), 64), 0));
    return s;
  };
  struct Case {
    codegen::KernelSpec spec;
    bool split;
    uint32_t wgRows;
    const char *message;
  };
  std::vector<Case> cases = {
      {sibling(DType::Q4_0, DType::Q8_0, 256), true, 0, "another format or shape"},
      {sibling(DType::Q4_0, DType::Q4_0, 512), true, 0, "another format or shape"},
      {sibling(DType::Q4_0, DType::Q4_0, 256), false, 0, "schedule of whole blocks a lane"},
      {sibling(DType::Q4_0, DType::Q4_0, 256), true, 2, "workgroup-rows schedule"}};
  cases.push_back(cases.back());
  cases.back().spec.epilogue.resize(1);
  cases.back().wgRows = 0;
  cases.back().message = "without an element-wise member";
  for (const Case &c : cases) {
    split_ = c.split;
    workgroupRows_ = c.wgRows;
    k = codegen::buildSpirvKernel(c.spec, target());
    split_ = true;
    workgroupRows_ = 0;
    ASSERT_FALSE(k.ok()) << c.message;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << k.status();
    EXPECT_NE(k.status().message().find(c.message), std::string::npos) << k.status();
  }
}

} // namespace
} // namespace sinter::test
