// PreciseTest.cpp - SINTER_PRECISE=1 on the cpu kind: what matches the reference bit for bit,
// and the measured bound where it cannot.
//
// Precise mode compiles kernels without reassociation (ordered vector reductions), without
// fast-math contraction (no fmul+fadd -> fma) and with activations kept in f32. Ops that are one
// correctly rounded f32 operation per element (add, element_mul, the copies) then give the
// reference's bytes exactly: the reference computes them in double, and a double sum or product
// of two floats rounded once to float is the correctly rounded f32 result. Ops that accumulate
// (matmul, attention, norms) sum in f32 in a fixed order where the reference sums in double, and
// exp/sin/cos are polynomials: for those the test pins the largest ULP distance it measured.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/CpuBackend.h"
#include "backends/ReferenceBackend.h"
#include "codegen/CpuCompiler.h"
#include "sinter/Factory.h"
#include "sinter/Status.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"

namespace sinter::test {
namespace {

// Distance in units in the last place between two finite floats (0 when equal).
uint64_t ulpDistance(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? int64_t(INT32_MIN) - int64_t(i) : int64_t(i);
  };
  int64_t d = ordered(a) - ordered(b);
  return uint64_t(d < 0 ? -d : d);
}

// Sets SINTER_PRECISE for the lifetime of the object (the JIT reads it when it is created).
struct PreciseEnv {
  explicit PreciseEnv(bool on) {
    if (on)
      setenv("SINTER_PRECISE", "1", 1);
    else
      unsetenv("SINTER_PRECISE");
  }
  ~PreciseEnv() { unsetenv("SINTER_PRECISE"); }
};

struct Case {
  const char *name;
  uint64_t maxUlp; ///< 0: bit for bit with the reference
  /// Records the op on `b` over `in` (3 inputs of kSize floats) into `out` (kSize floats).
  std::function<absl::Status(ComputeBackend &b, BufferHandle *in, BufferHandle out)> run;
};

constexpr uint32_t kSize = 256, kRows = 16;

// The bounds are the largest distances measured on random inputs in [-1, 1] (x86-64, AVX2 and
// AVX-512 hosts), rounded up; tools/run-long-tests.sh reruns them on more seeds.
const Case kCases[] = {
    {"add", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.add(in[0], in[1], out, kSize);
     }},
    {"element_mul", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.elementMul(in[0], in[1], out, kSize);
     }},
    {"add_in_place_chain", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       // A fusible chain: each op must still round to f32 on its own.
       SINTER_RETURN_IF_ERROR(b.elementMul(in[0], in[1], out, kSize));
       SINTER_RETURN_IF_ERROR(b.add(out, in[2], out, kSize));
       return b.elementMul(out, in[0], out, kSize);
     }},
    {"copy_buffer_offset", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       SINTER_RETURN_IF_ERROR(b.copyBuffer(in[0], out, kSize * 4));
       return b.copyBufferOffset(in[1], out, 12, 40, 400);
     }},
    {"silu", 3,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.silu(in[0], out, kSize);
     }},
    {"softmax", 4,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.softmax(in[0], out, kSize);
     }},
    {"rms_norm", 4,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.rmsNorm(in[0], in[1], out, kSize, 1e-5f);
     }},
    {"rope", 2,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       SINTER_RETURN_IF_ERROR(b.copyBuffer(in[0], out, kSize * 4));
       return b.rope(out, in[1], 17, 64, 10000.0f, 4, 4);
     }},
};

// Contractions: relative to the largest |reference| of the output, since cancellation makes
// ULPs of a sum meaningless near zero.
const Case kContractions[] = {
    {"matmul", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.matmul(in[0], in[1], out, 1, kSize / kRows, kRows); // 1x16 · 16x16
     }},
    {"attn_score", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.attnScore(in[0], in[1], out, 16, 16, 0, 0, 16);
     }},
    {"attn_value", 0,
     [](ComputeBackend &b, BufferHandle *in, BufferHandle out) {
       return b.attnValue(in[0], in[1], out, 16, 16, 0, 16, 0);
     }},
};

struct Outputs {
  std::vector<float> got, want;
};

Outputs runCase(ComputeBackend &backend, const Case &c, uint32_t seed) {
  ReferenceBackend reference;
  Outputs o;
  for (ComputeBackend *b : {&backend, static_cast<ComputeBackend *>(&reference)}) {
    std::mt19937 rng(seed);
    BufferHandle in[3];
    for (BufferHandle &h : in)
      h = uploadFloats(*b, randomFloats(kSize, rng));
    BufferHandle out = uploadFloats(*b, std::vector<float>(kSize, 0.0f));
    absl::Status s = c.run(*b, in, out);
    EXPECT_TRUE(s.ok()) << c.name << ": " << s;
    (b == &backend ? o.got : o.want) = downloadFloats(*b, out, kSize);
    for (BufferHandle h : in)
      (void)b->free(h);
    (void)b->free(out);
  }
  return o;
}

std::unique_ptr<ComputeBackend> cpuBackend(bool fusion) {
  BackendOptions options;
  options.kind = "cpu";
  options.fusion = fusion;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

class PreciseTest : public ::testing::TestWithParam<bool> {};

TEST_P(PreciseTest, ElementwiseOpsMatchTheReferenceBitForBitAndTheRestWithinTheirBound) {
  PreciseEnv precise(true);
  std::unique_ptr<ComputeBackend> cpu = cpuBackend(GetParam());
  ASSERT_NE(cpu, nullptr);
  for (const Case &c : kCases) {
    uint64_t worst = 0;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Outputs o = runCase(*cpu, c, seed);
      ASSERT_EQ(o.got.size(), o.want.size());
      for (size_t i = 0; i < o.got.size(); ++i)
        worst = std::max(worst, ulpDistance(o.got[i], o.want[i]));
      expectNmse(o.got, o.want, kF32Tolerance, c.name);
    }
    std::printf("precise %s %s: max %llu ulp from the reference (bound %llu)\n",
                GetParam() ? "fused" : "unfused", c.name, static_cast<unsigned long long>(worst),
                static_cast<unsigned long long>(c.maxUlp));
    EXPECT_LE(worst, c.maxUlp) << c.name;
  }
}

TEST_P(PreciseTest, ContractionsStayWithinARelativeBound) {
  PreciseEnv precise(true);
  std::unique_ptr<ComputeBackend> cpu = cpuBackend(GetParam());
  ASSERT_NE(cpu, nullptr);
  for (const Case &c : kContractions) {
    double worst = 0;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Outputs o = runCase(*cpu, c, seed);
      float scale = 0;
      for (float w : o.want)
        scale = std::max(scale, std::fabs(w));
      for (size_t i = 0; i < o.got.size(); ++i)
        worst = std::max(worst, std::fabs(double(o.got[i]) - o.want[i]) / std::max(scale, 1e-30f));
      expectNmse(o.got, o.want, kF32Tolerance, c.name);
    }
    std::printf("precise %s %s: max error %.3g of the largest output\n",
                GetParam() ? "fused" : "unfused", c.name, worst);
    // f32 accumulation of 16 products in a fixed order: a few f32 epsilons (1.19e-7).
    EXPECT_LE(worst, 8 * 1.19e-7) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fusion, PreciseTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "fused" : "unfused";
                         });

// The compiled code itself: no fast-math flags and no reassociated reductions in precise mode,
// while the default mode has them (so the check can fail).
TEST(PreciseIRTest, PreciseKernelsCarryNoFastMathFlags) {
  OpCall op;
  op.kind = OpKind::RmsNorm;
  op.buffers = {BufferHandle{1}, BufferHandle{2}, BufferHandle{3}};
  op.ints[0] = 4096;
  op.scalar = 1e-5f;
  std::string fast, precise;
  {
    PreciseEnv env(false);
    absl::StatusOr<std::unique_ptr<codegen::CpuCompiler>> cpu = codegen::CpuCompiler::create();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    absl::StatusOr<std::string> ir = (*cpu)->kernelIR(op, 0, /*optimized=*/false);
    ASSERT_TRUE(ir.ok()) << ir.status();
    fast = *ir;
  }
  {
    PreciseEnv env(true);
    absl::StatusOr<std::unique_ptr<codegen::CpuCompiler>> cpu = codegen::CpuCompiler::create();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    absl::StatusOr<std::string> ir = (*cpu)->kernelIR(op, 0, /*optimized=*/false);
    ASSERT_TRUE(ir.ok()) << ir.status();
    precise = *ir;
  }
  EXPECT_THAT(fast, ::testing::HasSubstr("contract"));
  EXPECT_THAT(precise, ::testing::Not(::testing::HasSubstr("contract")));
  EXPECT_THAT(precise, ::testing::Not(::testing::HasSubstr("reassoc")));
  EXPECT_THAT(precise, ::testing::Not(::testing::HasSubstr(" fast ")));
}

} // namespace
} // namespace sinter::test
