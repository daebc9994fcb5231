// CpuKernelTest.cpp - tests the CPU kernel builders (codegen/llvm/*Kernels.cpp, Dequant.cpp,
// ElementwiseMath.cpp): every OpKind, and quantized_matmul for every Supported dtype, compiled
// and run against executeReference on random inputs with poisoned outputs.
#include <cmath>
#include <limits>

#include "tests/support/ScopedEnv.h"
#include "tests/unit/codegen/KernelHarness.h"

namespace sinter::test {
namespace {

using codegen::CpuCompiler;

BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

class CpuKernelTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<CpuCompiler>> c = CpuCompiler::create();
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = c->release();
  }
  static void TearDownTestSuite() {
    delete compiler_;
    compiler_ = nullptr;
  }
  static CpuCompiler *compiler_;
};
CpuCompiler *CpuKernelTest::compiler_ = nullptr;

TEST_F(CpuKernelTest, Matmul) {
  struct Shape {
    uint32_t m, n, k;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 16, 16}, Shape{3, 37, 19}, Shape{4, 64, 128},
                  Shape{2, 15, 300}, Shape{1, 512, 64}})
    checkOp(*compiler_, ops::matmul(slot(0), slot(1), slot(2), s.m, s.n, s.k),
            "matmul " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                std::to_string(s.k));
}

TEST_F(CpuKernelTest, Softmax) {
  for (uint32_t size : {1u, 7u, 16u, 100u, 1000u, 4099u}) {
    checkOp(*compiler_, ops::softmax(slot(0), slot(1), size), "softmax " + std::to_string(size));
    checkOp(*compiler_, ops::softmax(slot(0), slot(0), size),
            "in-place softmax " + std::to_string(size));
  }
}

TEST_F(CpuKernelTest, SoftmaxOfLargeValuesDoesNotOverflow) {
  // Inputs around 80 would overflow a naive exp(x) / sum; max subtraction keeps them finite.
  std::vector<float> in = {80.0f, 85.0f, -90.0f, 88.0f, 1.0f};
  OpCall op = ops::softmax(slot(0), slot(1), uint32_t(in.size()));
  Trace trace = singleOpTrace(op, {in.size() * 4, in.size() * 4});
  auto plan = compiler_->compile(trace, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  OpBuffers out{{floatBytes(in), poisonBytes(in.size() * 4)}};
  OpBuffers ref = out;
  ASSERT_TRUE(runPlan(**plan, out).ok());
  runReference(op, ref);
  expectSameResults(op, out, ref, "softmax of large values");
}

TEST_F(CpuKernelTest, RmsNorm) {
  for (uint32_t size : {1u, 5u, 64u, 2048u, 5633u}) {
    checkOp(*compiler_, ops::rmsNorm(slot(0), slot(1), slot(2), size, 1e-5f),
            "rms_norm " + std::to_string(size));
    checkOp(*compiler_, ops::rmsNorm(slot(0), slot(1), slot(0), size, 1e-6f),
            "in-place rms_norm " + std::to_string(size));
  }
}

TEST_F(CpuKernelTest, Rope) {
  struct Case {
    uint32_t pos, headDim, headsQ, headsK;
  };
  for (Case c : {Case{0, 64, 4, 2}, Case{7, 64, 32, 4}, Case{1000, 128, 2, 2},
                 Case{100000, 6, 3, 1}, Case{3, 2, 1, 0}}) {
    std::string what =
        "rope pos " + std::to_string(c.pos) + " head_dim " + std::to_string(c.headDim);
    checkOp(*compiler_, ops::rope(slot(0), slot(1), c.pos, c.headDim, 10000.0f, c.headsQ, c.headsK),
            what);
  }
  // A different base (freq_base is baked into the kernel, so this is a second kernel).
  checkOp(*compiler_, ops::rope(slot(0), slot(1), 42, 64, 500000.0f, 8, 8), "rope base 5e5");
}

TEST_F(CpuKernelTest, ElementwiseOps) {
  for (uint32_t size : {1u, 15u, 16u, 17u, 1000u, 100003u}) {
    std::string n = std::to_string(size);
    checkOp(*compiler_, ops::silu(slot(0), slot(1), size), "silu " + n);
    checkOp(*compiler_, ops::silu(slot(0), slot(0), size), "in-place silu " + n);
    checkOp(*compiler_, ops::elementMul(slot(0), slot(1), slot(2), size), "element_mul " + n);
    checkOp(*compiler_, ops::elementMul(slot(0), slot(1), slot(0), size), "in-place mul " + n);
    checkOp(*compiler_, ops::add(slot(0), slot(1), slot(2), size), "add " + n);
    checkOp(*compiler_, ops::add(slot(0), slot(1), slot(1), size), "in-place add " + n);
  }
}

TEST_F(CpuKernelTest, SiluAtTheEndsOfTheRange) {
  std::vector<float> in = {-200.0f, -88.0f, -87.0f, -20.0f, -1e-8f, 0.0f, 1e-8f,
                           3.0f,    20.0f,  88.0f,  89.0f,  200.0f, 1e30f};
  OpCall op = ops::silu(slot(0), slot(1), uint32_t(in.size()));
  Trace trace = singleOpTrace(op, {in.size() * 4, in.size() * 4});
  auto plan = compiler_->compile(trace, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  OpBuffers out{{floatBytes(in), poisonBytes(in.size() * 4)}};
  OpBuffers ref = out;
  ASSERT_TRUE(runPlan(**plan, out).ok());
  runReference(op, ref);
  expectSameResults(op, out, ref, "silu at the ends");
}

TEST_F(CpuKernelTest, SiluOfNanIsNan) {
  std::vector<float> in = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  OpCall op = ops::silu(slot(0), slot(1), 2);
  auto plan = compiler_->compile(singleOpTrace(op, {8, 8}), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  OpBuffers out{{floatBytes(in), poisonBytes(8)}};
  ASSERT_TRUE(runPlan(**plan, out).ok());
  std::vector<float> result = bytesFloats(out.bytes[1]);
  EXPECT_TRUE(std::isnan(result[0]));
  EXPECT_FALSE(isPoison(result[0]));
  EXPECT_NEAR(result[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST_F(CpuKernelTest, Copies) {
  for (uint64_t size : {0ull, 1ull, 13ull, 4096ull}) {
    std::string n = std::to_string(size);
    checkOp(*compiler_, ops::copyBuffer(slot(0), slot(1), size), "copy_buffer " + n);
    checkOp(*compiler_, ops::copyBufferOffset(slot(0), slot(1), 3, 17, size),
            "copy_buffer_offset " + n);
  }
  // Overlapping ranges of one buffer behave like memmove, both directions.
  checkOp(*compiler_, ops::copyBufferOffset(slot(0), slot(0), 0, 5, 100), "overlap forward");
  checkOp(*compiler_, ops::copyBufferOffset(slot(0), slot(0), 7, 2, 100), "overlap backward");
}

TEST_F(CpuKernelTest, AttnScore) {
  struct Case {
    uint32_t headDim, seqLen, headOffset, kvOffset, kvStride;
  };
  for (Case c : {Case{64, 1, 0, 0, 64}, Case{64, 257, 128, 64, 256}, Case{48, 33, 48, 0, 96},
                 Case{5, 9, 3, 2, 11}, Case{128, 40, 256, 128, 512}}) {
    std::string what =
        "attn_score head_dim " + std::to_string(c.headDim) + " seq_len " + std::to_string(c.seqLen);
    checkOp(*compiler_,
            ops::attnScore(slot(0), slot(1), slot(2), c.headDim, c.seqLen, c.headOffset, c.kvOffset,
                           c.kvStride),
            what);
  }
}

TEST_F(CpuKernelTest, AttnValue) {
  struct Case {
    uint32_t headDim, seqLen, kvOffset, kvStride, outOffset;
  };
  for (Case c : {Case{64, 1, 0, 64, 0}, Case{64, 300, 64, 256, 128}, Case{40, 17, 8, 80, 40},
                 Case{5, 9, 2, 11, 3}, Case{128, 65, 128, 512, 256}}) {
    std::string what =
        "attn_value head_dim " + std::to_string(c.headDim) + " seq_len " + std::to_string(c.seqLen);
    checkOp(*compiler_,
            ops::attnValue(slot(0), slot(1), slot(2), c.headDim, c.seqLen, c.kvOffset, c.kvStride,
                           c.outOffset),
            what);
  }
}

class QMatmulTest : public CpuKernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(QMatmulTest, MatchesTheReference) {
  DType dtype = GetParam();
  const DTypeInfo &info = dtypeInfo(dtype);
  struct Shape {
    uint32_t rows, cols;
  };
  std::vector<Shape> shapes = {{1, 256}, {5, 512}, {67, 2048}, {3, 5632}};
  if (info.blockSize == 1) // scalar formats: column counts that are not vector multiples
    for (Shape s : {Shape{4, 1}, Shape{3, 35}, Shape{9, 100}})
      shapes.push_back(s);
  for (Shape s : shapes) {
    std::string what = std::string("quantized_matmul ") + info.name + " " + std::to_string(s.rows) +
                       "x" + std::to_string(s.cols);
    // Q4_0 and Q8_0 quantize x to int8 on VNNI hosts from 64 rows: SEMANTICS.md's bound for that
    // is 5e-4.
    bool int8 =
        compiler_->int8Dot() && (dtype == DType::Q4_0 || dtype == DType::Q8_0) && s.rows >= 64;
    checkOp(*compiler_, ops::quantizedMatmul(slot(0), slot(1), slot(2), s.rows, s.cols, dtype),
            what, s.rows * 31 + s.cols, {}, int8 ? kQuantizedActivationTolerance : kF32Tolerance);
  }
}

// With SINTER_INT8_DOT=0 every dtype keeps x in f32 and meets the f32 bound (1e-7); on a host with
// VNNI the default int8 path is really taken (the kernel's IR calls vpdpbusd) and stays within
// 5e-4 while differing from the f32 path (it does quantize).
TEST_F(CpuKernelTest, Int8DotPathAndItsSwitch) {
  ScopedEnv off("SINTER_INT8_DOT", "0");
  absl::StatusOr<std::unique_ptr<CpuCompiler>> f32 = CpuCompiler::create();
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_FALSE((*f32)->int8Dot());
  for (DType dtype : {DType::Q4_0, DType::Q8_0}) {
    OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), 67, 2048, dtype);
    checkOp(**f32, op, std::string("f32 path ") + dtypeName(dtype), 99, {}, kF32Tolerance);
    absl::StatusOr<std::string> ir = compiler_->kernelIR(op);
    ASSERT_TRUE(ir.ok()) << ir.status();
    absl::StatusOr<std::string> f32Ir = (*f32)->kernelIR(op);
    ASSERT_TRUE(f32Ir.ok()) << f32Ir.status();
    EXPECT_EQ(f32Ir->find("vpdpbusd"), std::string::npos);
    if (!compiler_->int8Dot()) {
      std::printf("host %s has no AVX-512 VNNI: the int8 path is not tested here\n",
                  compiler_->hostDescription().c_str());
      continue;
    }
    EXPECT_NE(ir->find("llvm.x86.avx512.vpdpbusd.512"), std::string::npos) << dtypeName(dtype);
  }
}

// With x = e_c the product is exactly weight c of each row: the in-loop dequantization must be
// bit-exact with dequantizeRow (ggml's values), not merely close.
TEST_P(QMatmulTest, DequantizesBitExactly) {
  DType dtype = GetParam();
  const uint32_t rows = 3, cols = 512;
  // The f32 path: the int8 one quantizes x, so its products are close, not exact.
  ScopedEnv off("SINTER_INT8_DOT", "0");
  absl::StatusOr<std::unique_ptr<CpuCompiler>> exact = CpuCompiler::create();
  ASSERT_TRUE(exact.ok()) << exact.status();
  CpuCompiler *compiler_ = exact->get();
  std::mt19937 rng(7);
  std::vector<uint8_t> weights = randomWeights(dtype, rows, cols, rng);
  std::vector<float> expected = dequantizeWeights(dtype, weights, rows, cols);
  OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, cols, dtype);
  auto plan = compiler_->compile(singleOpTrace(op, {weights.size(), cols * 4, rows * 4}), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (uint32_t c : {0u, 1u, 15u, 16u, 31u, 32u, 100u, 255u, 256u, 300u, 511u}) {
    std::vector<float> x(cols, 0.0f);
    x[c] = 1.0f;
    OpBuffers buffers{{weights, floatBytes(x), poisonBytes(rows * 4)}};
    ASSERT_TRUE(runPlan(**plan, buffers).ok());
    std::vector<float> out = bytesFloats(buffers.bytes[2]);
    for (uint32_t r = 0; r < rows; ++r)
      EXPECT_EQ(out[r], expected[r * cols + c]) << dtypeName(dtype) << " row " << r << " col " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(AllSupported, QMatmulTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                           DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto &info) { return dtypeName(info.param); });

} // namespace
} // namespace sinter::test
