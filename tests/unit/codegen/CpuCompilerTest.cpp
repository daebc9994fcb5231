// CpuCompilerTest.cpp - tests codegen/CpuCompiler.cpp: runtime parameters, the kernel cache,
// splitting across threads, the compile-failure fallback, whole LazyBackend runs against the
// reference kernels, LLVM IR for sinter-dump, and the cold compile of a real model's decode step.
#include "codegen/CpuCompiler.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gmock/gmock.h>

#include "backends/CpuBackend.h"
#include "runtime/LazyBackend.h"
#include "support/ThreadPool.h"
#include "tests/support/RangeRows.h"
#include "tests/unit/codegen/KernelHarness.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Synthetic.h"

namespace sinter::test {
namespace {

using codegen::CpuCompiler;
using codegen::CpuCompilerOptions;
using ::testing::HasSubstr;

// These tests are about compiling, caching, splitting and falling back, checked against the
// reference at the f32 bound: they run the f32 contraction path. The int8 path of Q4_0/Q8_0
// (quantized x) is tested in CpuKernelTest and by the conformance table at 5e-4.
class F32Contractions : public ::testing::Environment {
public:
  void SetUp() override { setenv("SINTER_INT8_DOT", "0", 1); }
};
const ::testing::Environment *const kF32Contractions =
    ::testing::AddGlobalTestEnvironment(new F32Contractions);

BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

std::unique_ptr<CpuCompiler> makeCompiler(CpuCompilerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<CpuCompiler>> c = CpuCompiler::create(std::move(options));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Compiles `base` once with `paramIndices` as parameters, then runs it for each of `variants`
// (ops of the same structure whose parameter integers differ) against the reference.
void checkParameters(CpuCompiler &compiler, const OpCall &base,
                     const std::vector<uint8_t> &paramIndices, const std::vector<OpCall> &variants,
                     const std::string &what) {
  std::vector<uint64_t> sizes(3, 0);
  for (const OpCall &v : variants) {
    std::vector<uint64_t> s = fittingSizes(v);
    for (size_t i = 0; i < s.size(); ++i)
      sizes[i] = std::max(sizes[i], s[i]);
  }
  sizes.resize(fittingSizes(base).size());
  std::vector<IntSlot> slots;
  for (uint8_t i : paramIndices)
    slots.push_back({0, i});
  uint64_t compiledBefore = compiler.stats().kernelsCompiled;
  auto plan = compiler.compile(singleOpTrace(base, sizes), slots);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(compiler.stats().kernelsCompiled, compiledBefore + 1) << what;
  std::mt19937 rng(3);
  for (const OpCall &v : variants) {
    std::vector<uint64_t> params;
    for (uint8_t i : paramIndices)
      params.push_back(v.ints[i]);
    OpBuffers out = makeBuffers(v, sizes, rng);
    OpBuffers ref = out;
    ASSERT_TRUE(runPlan(**plan, out, params).ok());
    runReference(v, ref);
    expectSameResults(v, out, ref, what + " with " + describeOp(v));
  }
}

TEST(CpuCompilerTest, ParametersWorkForSeveralValuesWithOneKernel) {
  auto compiler = makeCompiler();
  ASSERT_TRUE(compiler);
  auto rope = [](uint32_t pos) { return ops::rope(slot(0), slot(1), pos, 64, 10000.0f, 4, 2); };
  checkParameters(*compiler, rope(0), {0}, {rope(0), rope(1), rope(255), rope(4000)}, "rope");
  auto score = [](uint32_t seq, uint32_t kvOff) {
    return ops::attnScore(slot(0), slot(1), slot(2), 64, seq, 64, kvOff, 256);
  };
  checkParameters(*compiler, score(1, 0), {1, 3},
                  {score(1, 0), score(2, 64), score(17, 128), score(257, 192)}, "attn_score");
  auto value = [](uint32_t seq) {
    return ops::attnValue(slot(0), slot(1), slot(2), 64, seq, 64, 256, 128);
  };
  checkParameters(*compiler, value(1), {1}, {value(1), value(33), value(300)}, "attn_value");
  auto softmax = [](uint32_t n) { return ops::softmax(slot(0), slot(0), n); };
  checkParameters(*compiler, softmax(1), {0}, {softmax(1), softmax(18), softmax(257)}, "softmax");
  auto kvWrite = [](uint32_t pos) {
    return ops::copyBufferOffset(slot(0), slot(1), 0, uint64_t(pos) * 1024, 1024);
  };
  checkParameters(*compiler, kvWrite(0), {1}, {kvWrite(0), kvWrite(5), kvWrite(63)}, "kv write");
  // A parameter that is a trip count the builder would otherwise bake in (n_cols).
  auto qm = [](uint32_t cols) {
    return ops::quantizedMatmul(slot(0), slot(1), slot(2), 9, cols, DType::Q4_0);
  };
  checkParameters(*compiler, qm(64), {1}, {qm(64), qm(96), qm(2048)}, "quantized_matmul n_cols");
  auto mm = [](uint32_t m, uint32_t n) { return ops::matmul(slot(0), slot(1), slot(2), m, n, 24); };
  checkParameters(*compiler, mm(1, 16), {0, 1}, {mm(1, 16), mm(3, 37), mm(2, 100)}, "matmul m, n");
}

TEST(CpuCompilerTest, OpsThatDifferOnlyInOffsetsShareOneKernel) {
  auto compiler = makeCompiler();
  ASSERT_TRUE(compiler);
  Trace trace;
  trace.buffers = {{256 * 4, true}, {64 * 256 * 4, true}, {64 * 4, true}};
  for (uint32_t h = 0; h < 8; ++h) {
    TraceEntry e;
    e.op = ops::attnScore(slot(0), slot(1), slot(2), 32, 64, h * 32, (h / 2) * 32, 256);
    trace.entries.push_back(e);
  }
  ASSERT_TRUE(compiler->compile(trace, {}).ok());
  EXPECT_EQ(compiler->stats().kernelsCompiled, 1u);
  EXPECT_EQ(compiler->stats().cacheHits, 7u);
  // seq_len is read at run time anyway: making it a parameter needs no new kernel.
  ASSERT_TRUE(compiler->compile(trace, {{3, 1}}).ok());
  EXPECT_EQ(compiler->stats().kernelsCompiled, 1u);
  // head_dim is baked in: as a parameter it is a new kernel (for that op only).
  ASSERT_TRUE(compiler->compile(trace, {{3, 0}}).ok());
  EXPECT_EQ(compiler->stats().kernelsCompiled, 2u);
  ASSERT_TRUE(compiler->compile(trace, {}).ok());
  EXPECT_EQ(compiler->stats().kernelsCompiled, 2u);
}

// Options that split every kernel with more than one unit across `pool`.
CpuCompilerOptions splittingOptions(ThreadPool &pool, bool fusePrologue = false) {
  CpuCompilerOptions options;
  options.pool = &pool;
  options.minParallelBytes = 0;
  options.fusePrologue = fusePrologue;
  return options;
}

TEST(CpuCompilerTest, SplittingAcrossThreadsGivesTheSameResults) {
  ThreadPool pool(4);
  auto compiler = makeCompiler(splittingOptions(pool));
  ASSERT_TRUE(compiler);
  checkOp(*compiler, ops::quantizedMatmul(slot(0), slot(1), slot(2), 1000, 512, DType::Q4_0),
          "split quantized_matmul");
  checkOp(*compiler, ops::quantizedMatmul(slot(0), slot(1), slot(2), 77, 256, DType::Q6_K),
          "split quantized_matmul q6_k");
  checkOp(*compiler, ops::silu(slot(0), slot(1), 100003), "split silu");
  checkOp(*compiler, ops::add(slot(0), slot(1), slot(0), 4097), "split in-place add");
  checkOp(*compiler, ops::matmul(slot(0), slot(1), slot(2), 7, 100, 33), "split matmul");
  checkOp(*compiler, ops::attnScore(slot(0), slot(1), slot(2), 64, 999, 0, 64, 128),
          "split attn_score");
  checkOp(*compiler, ops::attnValue(slot(0), slot(1), slot(2), 120, 99, 8, 128, 0),
          "split attn_value");
}

// A kernel called for [begin, end) writes exactly those rows.
TEST(CpuCompilerTest, AKernelWritesOnlyItsRange) {
  auto jit = codegen::CpuJit::create();
  ASSERT_TRUE(jit.ok()) << jit.status();
  const uint32_t rows = 20, cols = 64;
  OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), rows, cols, DType::Q8_0);
  auto fns = (*jit)->compile({codegen::singleOpSpec(op, 0)});
  ASSERT_TRUE(fns.ok()) << fns.status();
  std::mt19937 rng(5);
  OpBuffers buffers = makeBuffers(op, fittingSizes(op, 0), rng);
  OpBuffers ref = buffers;
  runReference(op, ref);
  int64_t ints[5] = {rows, cols, 0, 0, 0};
  std::vector<uint8_t *> data = buffers.data();
  fns->entries[0](data.data(), ints, 3, 7);
  std::vector<float> out = bytesFloats(buffers.bytes[2]), expected = bytesFloats(ref.bytes[2]);
  for (uint32_t r = 0; r < rows; ++r) {
    if (r >= 3 && r < 7)
      EXPECT_NEAR(out[r], expected[r], 1e-4 * std::fabs(expected[r]) + 1e-6) << "row " << r;
    else
      EXPECT_TRUE(isPoison(out[r])) << "row " << r << " outside [3, 7) was written";
  }
}

// A small layer-like sequence with every op kind, through the public calls of a LazyBackend.
std::vector<float> runSequence(ComputeBackend &b, uint32_t pos) {
  const uint32_t dim = 64, headDim = 16, heads = 4;
  std::mt19937 rng(11);
  BufferHandle x = uploadFloats(b, randomFloats(dim, rng));
  BufferHandle g = uploadFloats(b, randomFloats(dim, rng));
  BufferHandle w = uploadFloats(b, randomFloats(dim * dim, rng));
  BufferHandle wq = uploadBytes(b, randomWeights(DType::Q4_0, dim, dim, rng));
  BufferHandle wk = uploadBytes(b, randomWeights(DType::Q6_K, dim, 256, rng));
  BufferHandle cache = *b.allocate(8 * dim * 4);
  BufferHandle n = *b.allocate(dim * 4), q = *b.allocate(dim * 4), k = *b.allocate(dim * 4);
  BufferHandle s = *b.allocate(8 * 4), o = *b.allocate(dim * 4), wide = *b.allocate(256 * 4);
  EXPECT_TRUE(b.rmsNorm(x, g, n, dim, 1e-5f).ok());
  EXPECT_TRUE(b.quantizedMatmul(wq, n, q, dim, dim, DType::Q4_0).ok());
  EXPECT_TRUE(b.matmul(n, w, k, 1, dim, dim).ok());
  EXPECT_TRUE(b.rope(q, k, pos, headDim, 10000.0f, heads, heads).ok());
  for (uint32_t t = 0; t <= pos; ++t)
    EXPECT_TRUE(b.copyBufferOffset(k, cache, 0, t * dim * 4, dim * 4).ok());
  for (uint32_t h = 0; h < heads; ++h) {
    EXPECT_TRUE(b.attnScore(q, cache, s, headDim, pos + 1, h * headDim, h * headDim, dim).ok());
    EXPECT_TRUE(b.softmax(s, s, pos + 1).ok());
    EXPECT_TRUE(b.attnValue(s, cache, o, headDim, pos + 1, h * headDim, dim, h * headDim).ok());
  }
  EXPECT_TRUE(b.silu(o, n, dim).ok());
  EXPECT_TRUE(b.elementMul(n, q, n, dim).ok());
  EXPECT_TRUE(b.add(n, x, x, dim).ok());
  EXPECT_TRUE(b.copyBuffer(x, wide, dim * 4).ok());
  EXPECT_TRUE(b.quantizedMatmul(wk, wide, s, 8, 256, DType::Q6_K).ok());
  std::vector<float> result = downloadFloats(b, x, dim);
  std::vector<float> tail = downloadFloats(b, s, 8);
  result.insert(result.end(), tail.begin(), tail.end());
  return result;
}

runtime::LazyBackendOptions cpuOptions(CpuCompilerOptions options = {}) {
  runtime::LazyBackendOptions o;
  o.compiler = makeCompiler(std::move(options));
  o.name = "lazy-cpu";
  return o;
}

TEST(CpuCompilerTest, LazyBackendMatchesTheReference) {
  runtime::LazyBackend reference; // the interpreter: reference kernels
  runtime::LazyBackend cpu(cpuOptions());
  for (uint32_t pos : {0u, 1u, 2u, 5u})
    expectNmse(runSequence(cpu, pos), runSequence(reference, pos), kF32Tolerance,
               "pos " + std::to_string(pos));
  EXPECT_THAT(cpu.lastPlanDescription(), HasSubstr("jit quantized_matmul_q4_0_nc64"));
}

TEST(CpuCompilerTest, KernelsThatFailToCompileRunOnTheReference) {
  runtime::LazyBackend reference;
  CpuCompilerOptions some;
  some.logFallbacks = false;
  some.failCompile = [](const OpCall &op) { return op.kind == OpKind::Softmax; };
  auto compiler = makeCompiler(some);
  ASSERT_TRUE(compiler);
  CpuCompiler *raw = compiler.get();
  runtime::LazyBackendOptions o;
  o.compiler = std::move(compiler);
  runtime::LazyBackend cpu(std::move(o));
  expectNmse(runSequence(cpu, 3), runSequence(reference, 3));
  EXPECT_EQ(raw->stats().fallbacks, 1u);
  EXPECT_THAT(cpu.lastPlanDescription(), HasSubstr("reference (failed to compile) softmax"));
  EXPECT_THAT(cpu.lastPlanDescription(), HasSubstr("jit attn_score"));

  // Every kernel failing: the plan is the reference kernels, bit for bit.
  CpuCompilerOptions all;
  all.logFallbacks = false;
  all.failCompile = [](const OpCall &) { return true; };
  runtime::LazyBackend allFallback(cpuOptions(all));
  EXPECT_EQ(runSequence(allFallback, 2), runSequence(reference, 2));
}

// The code of one compile() lives as long as its module: the last owner's release removes it
// from the JIT (memory and symbols), and the JIT goes on compiling the same kernel again.
TEST(CpuCompilerTest, AJitModuleIsRemovedWhenItsLastOwnerLetsGo) {
  auto jit = codegen::CpuJit::create(std::string());
  ASSERT_TRUE(jit.ok()) << jit.status();
  codegen::KernelSpec spec = codegen::singleOpSpec(ops::silu(slot(0), slot(1), 8), 0);
  auto run = [](codegen::KernelFn fn) {
    std::vector<float> in = {-2, -1, 0, 1, 2, 3, 4, 5}, out(8, 0.0f);
    uint8_t *buffers[3] = {reinterpret_cast<uint8_t *>(in.data()),
                           reinterpret_cast<uint8_t *>(out.data()), nullptr};
    int64_t ints[5] = {8, 0, 0, 0, 0};
    fn(buffers, ints, 0, 8);
    return out[4]; // silu(2)
  };
  const float silu2 = 2.0f / (1.0f + std::exp(-2.0f));
  auto first = (*jit)->compile({spec, spec});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*jit)->times().liveModules, 1u);
  EXPECT_EQ((*jit)->times().liveKernels, 2u);
  std::shared_ptr<const codegen::CpuJitModule> held = first->code;
  first->code.reset();
  EXPECT_EQ((*jit)->times().liveModules, 1u) << "a copy still holds it";
  EXPECT_NEAR(run(first->entries[1]), silu2, 1e-6);
  held.reset();
  codegen::CpuJitTimes times = (*jit)->times();
  EXPECT_EQ(times.liveModules, 0u);
  EXPECT_EQ(times.liveKernels, 0u);
  EXPECT_EQ(times.removedModules, 1u);
  auto again = (*jit)->compile({spec});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NEAR(run(again->entries[0]), silu2, 1e-6);
  EXPECT_EQ((*jit)->times().liveModules, 1u);
}

// A cache of one kernel: what it drops lives on in the plans that run it, and goes with them.
TEST(CpuCompilerTest, EvictedKernelsLiveWhileAPlanHoldsThem) {
  CpuCompilerOptions options;
  options.kernelCacheCapacity = 1;
  auto compiler = makeCompiler(options);
  ASSERT_TRUE(compiler);
  std::vector<std::unique_ptr<Plan>> plans;
  for (float eps : {1e-5f, 2e-5f, 3e-5f}) { // eps is baked in: a kernel each
    OpCall op = ops::rmsNorm(slot(0), slot(1), slot(2), 64, eps);
    auto plan = compiler->compile(singleOpTrace(op, fittingSizes(op)), {});
    ASSERT_TRUE(plan.ok()) << plan.status();
    plans.push_back(std::move(*plan));
  }
  codegen::CpuCompilerStats s = compiler->stats();
  EXPECT_EQ(s.cachedKernels, 1u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.jit.liveKernels, 3u) << "each plan holds its kernel";
  plans.clear();
  s = compiler->stats();
  EXPECT_EQ(s.jit.liveKernels, 1u) << "only the cached one is left";
  EXPECT_EQ(s.jit.removedModules, 2u);
}

TEST(CpuCompilerTest, TheFailureIsAStatusWithTheKernelNamed) {
  auto jit = codegen::CpuJit::create();
  ASSERT_TRUE(jit.ok());
  codegen::KernelSpec good = codegen::singleOpSpec(ops::silu(slot(0), slot(1), 8), 0);
  codegen::KernelSpec bad = good;
  bad.injectFailure = true;
  auto result = (*jit)->compile({good, bad});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("silu"));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("verifier"));
  // The JIT stays usable.
  EXPECT_TRUE((*jit)->compile({good}).ok());
  codegen::KernelSpec fused = good;
  fused.epilogue.push_back(good.anchor);
  auto unfusable = (*jit)->compile({fused});
  ASSERT_FALSE(unfusable.ok());
  EXPECT_EQ(unfusable.status().code(), absl::StatusCode::kUnimplemented);
}

// A fused kernel of the fusion pipeline: rms_norm folded into the quantized_matmul's kernel.
TEST(CpuCompilerTest, MultiOpKernelsRunTheirMembers) {
  CpuCompilerOptions options;
  options.fusePrologue = true;
  auto compiler = makeCompiler(options);
  ASSERT_TRUE(compiler);
  OpCall norm = ops::rmsNorm(slot(0), slot(1), slot(2), 256, 1e-5f);
  OpCall mv = ops::quantizedMatmul(slot(3), slot(2), slot(4), 32, 256, DType::Q4_K);
  KernelProgram program;
  Kernel kernel;
  kernel.name = "rms_norm+quantized_matmul";
  for (const OpCall &op : {norm, mv}) {
    KernelMember m;
    m.entry.op = op;
    kernel.ops.push_back(m);
  }
  program.kernels.push_back(kernel);
  auto plan = compiler->compileProgram(program);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->numKernels(), 1u);
  std::mt19937 rng(2);
  OpBuffers out;
  out.bytes = {floatBytes(randomFloats(256, rng)), floatBytes(randomFloats(256, rng)),
               poisonBytes(256 * 4), randomWeights(DType::Q4_K, 32, 256, rng), poisonBytes(32 * 4)};
  OpBuffers ref = out;
  ASSERT_TRUE(runPlan(**plan, out).ok());
  runReference(norm, ref);
  runReference(mv, ref);
  expectNmse(bytesFloats(out.bytes[4]), bytesFloats(ref.bytes[4]));
  expectNmse(bytesFloats(out.bytes[2]), bytesFloats(ref.bytes[2]));
  EXPECT_EQ(compiler->stats().fusedKernels, 1u);
}

// One kernel of `ops` (fused) or one kernel per op.
KernelProgram programOf(const std::vector<OpCall> &ops, bool oneKernel) {
  KernelProgram program;
  for (const OpCall &op : ops) {
    if (!oneKernel || program.kernels.empty())
      program.kernels.emplace_back();
    KernelMember m;
    m.entry.op = op;
    program.kernels.back().ops.push_back(m);
  }
  return program;
}

// Fused quantized_matmul kernels (rms_norm prologue; add, silu + element_mul epilogues) split
// across a pool: every buffer as the reference leaves it, and bit for bit what the same ops
// leave as kernels of their own.
TEST(CpuCompilerTest, FusedQMatmulKernelsMatchTheirMembers) {
  ThreadPool pool(3);
  auto compiler = makeCompiler(splittingOptions(pool, /*fusePrologue=*/true));
  ASSERT_TRUE(compiler);
  const uint32_t rows = 96, cols = 256;
  // Slots: 0 norm in, 1 norm weight, 2 normalized x, 3 W, 4 out, 5 residual / up weights,
  // 6 up out.
  std::vector<std::pair<std::string, std::vector<OpCall>>> cases = {
      {"rms_norm+qmatmul+add",
       {ops::rmsNorm(slot(0), slot(1), slot(2), cols, 1e-5f),
        ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, DType::Q4_0),
        ops::add(slot(4), slot(5), slot(5), rows)}},
      {"rms_norm+qmatmulx2+silu+element_mul",
       {ops::rmsNorm(slot(0), slot(1), slot(2), cols, 1e-5f),
        ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, DType::Q8_0),
        ops::quantizedMatmul(slot(5), slot(2), slot(6), rows, cols, DType::Q8_0),
        ops::silu(slot(4), slot(4), rows), ops::elementMul(slot(4), slot(6), slot(4), rows)}},
      {"qmatmul+add (residual first)",
       {ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, DType::Q4_K),
        ops::add(slot(5), slot(4), slot(5), rows)}},
  };
  for (const auto &[what, opList] : cases) {
    std::mt19937 rng(7);
    bool swiglu = opList.size() == 5;
    DType dtype = opList[swiglu ? 1 : opList.size() == 3 ? 1 : 0].dtype;
    OpBuffers in;
    in.bytes = {floatBytes(randomFloats(cols, rng)),
                floatBytes(randomFloats(cols, rng)),
                opList.size() == 2 ? floatBytes(randomFloats(cols, rng)) : poisonBytes(cols * 4),
                randomWeights(dtype, rows, cols, rng),
                poisonBytes(rows * 4),
                swiglu ? randomWeights(dtype, rows, cols, rng)
                       : floatBytes(randomFloats(rows, rng)),
                poisonBytes(rows * 4)};
    uint64_t fusedBefore = compiler->stats().fusedKernels;
    auto fused = compiler->compileProgram(programOf(opList, true));
    auto separate = compiler->compileProgram(programOf(opList, false));
    ASSERT_TRUE(fused.ok() && separate.ok()) << what;
    EXPECT_GT(compiler->stats().fusedKernels, fusedBefore) << what;
    OpBuffers out = in, sep = in, ref = in;
    ASSERT_TRUE(runPlan(**fused, out).ok());
    ASSERT_TRUE(runPlan(**separate, sep).ok());
    for (const OpCall &op : opList)
      runReference(op, ref);
    for (size_t b : {size_t(2), size_t(4), size_t(5), size_t(6)}) {
      if (b == 5 && swiglu)
        continue;
      EXPECT_EQ(out.bytes[b], sep.bytes[b]) << what << ": buffer " << b;
      if (b != 6 || swiglu)
        expectNmse(bytesFloats(out.bytes[b]), bytesFloats(ref.bytes[b]), kF32Tolerance,
                   what + ": buffer " + std::to_string(b));
    }
  }
}

// The rms_norm prologue over rows at the ends of f32's range (tests/support/RangeRows.h), split
// across a pool, with F32, Q4_0 and Q8_0 weights: the reference's results (NaN where they are
// NaN), the normalized vector included, and bit for bit what the unfused kernels leave.
TEST(CpuCompilerTest, FusedRmsNormPrologueKeepsTheRange) {
  ThreadPool pool(3);
  auto compiler = makeCompiler(splittingOptions(pool, /*fusePrologue=*/true));
  ASSERT_TRUE(compiler);
  const uint32_t rows = 96, cols = 1024;
  for (const RangeRow &row : rangeRows())
    for (DType dtype : {DType::F32, DType::Q4_0, DType::Q8_0}) {
      const std::string what = std::string("rms_norm of a ") + row.name + " row -> " +
                               dtypeName(dtype) + " quantized_matmul";
      std::vector<OpCall> opList = {
          ops::rmsNorm(slot(0), slot(1), slot(2), cols, row.eps),
          ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, dtype)};
      std::mt19937 rng(7);
      OpBuffers in;
      in.bytes = {floatBytes(rangeRowValues(row.kind, cols)),
                  floatBytes(randomFloats(cols, rng, 0.5f, 1.5f)), poisonBytes(cols * 4),
                  randomWeights(dtype, rows, cols, rng), poisonBytes(rows * 4)};
      uint64_t fusedBefore = compiler->stats().fusedKernels;
      auto fused = compiler->compileProgram(programOf(opList, true));
      auto separate = compiler->compileProgram(programOf(opList, false));
      ASSERT_TRUE(fused.ok() && separate.ok()) << what;
      EXPECT_GT(compiler->stats().fusedKernels, fusedBefore) << what;
      OpBuffers out = in, sep = in, ref = in;
      ASSERT_TRUE(runPlan(**fused, out).ok()) << what;
      ASSERT_TRUE(runPlan(**separate, sep).ok()) << what;
      for (const OpCall &op : opList)
        runReference(op, ref);
      const double tolerance = dtype == DType::F32 ? kF32Tolerance : kQuantizedActivationTolerance;
      for (size_t b : {size_t(2), size_t(4)}) {
        EXPECT_EQ(out.bytes[b], sep.bytes[b]) << what << ": buffer " << b;
        EXPECT_TRUE(nmseWithinMatchingNaN<float>(bytesFloats(out.bytes[b]),
                                                 bytesFloats(ref.bytes[b]), tolerance))
            << what << ": buffer " << b;
      }
    }
  EXPECT_EQ(compiler->stats().fallbacks, 0u);
}

// An epilogue chain longer than a fused kernel takes: the row loop runs the member kernels, and
// the norm that the anchor reads stays before the loop.
TEST(CpuCompilerTest, LongEpilogueChainsRunTheirMemberKernels) {
  ThreadPool pool(3);
  auto compiler = makeCompiler(splittingOptions(pool, /*fusePrologue=*/true));
  ASSERT_TRUE(compiler);
  const uint32_t rows = 64, cols = 128;
  std::vector<OpCall> opList = {
      ops::rmsNorm(slot(0), slot(1), slot(2), cols, 1e-5f),
      ops::quantizedMatmul(slot(3), slot(2), slot(4), rows, cols, DType::Q8_0)};
  for (int i = 0; i < 4; ++i)
    opList.push_back(ops::add(slot(4), slot(5), slot(4), rows));
  auto fused = compiler->compileProgram(programOf(opList, true));
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(compiler->stats().fusedKernels, 0u);
  EXPECT_THAT((*fused)->describe(), HasSubstr("4 epilogue op(s); 0 fused kernel(s) (rms_norm"));
  std::mt19937 rng(11);
  OpBuffers out;
  out.bytes = {floatBytes(randomFloats(cols, rng)),
               floatBytes(randomFloats(cols, rng)),
               poisonBytes(cols * 4),
               randomWeights(DType::Q8_0, rows, cols, rng),
               poisonBytes(rows * 4),
               floatBytes(randomFloats(rows, rng))};
  OpBuffers ref = out;
  ASSERT_TRUE(runPlan(**fused, out).ok());
  for (const OpCall &op : opList)
    runReference(op, ref);
  expectNmse(bytesFloats(out.bytes[4]), bytesFloats(ref.bytes[4]));
  expectNmse(bytesFloats(out.bytes[2]), bytesFloats(ref.bytes[2]));
}

TEST(CpuCompilerTest, KernelIRIsVectorizedLLVMIR) {
  auto compiler = makeCompiler();
  ASSERT_TRUE(compiler);
  OpCall op = ops::quantizedMatmul(slot(0), slot(1), slot(2), 64, 2048, DType::Q4_0);
  EXPECT_EQ(CpuCompiler::kernelName(op), "quantized_matmul_q4_0_nc2048");
  absl::StatusOr<std::string> ir = compiler->kernelIR(op);
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, HasSubstr("define void @quantized_matmul_q4_0_nc2048(ptr"));
  EXPECT_THAT(*ir, HasSubstr("x float>"));
  EXPECT_THAT(*ir, HasSubstr("fpext half"));
  absl::StatusOr<std::string> raw = compiler->kernelIR(op, 0, /*optimized=*/false);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_THAT(*raw, HasSubstr("align 1"));
  std::printf("host: %s\n", compiler->hostDescription().c_str());
}

std::string modelPath() {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  return std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
}

// Decodes a few tokens of `weights` on the cpu plans and on the reference kernels; prints the
// cold compile time of the decode step's plan.
void decodeAndCompare(const model::ModelWeights &weights, const char *what, uint32_t steps) {
  runtime::LazyBackend reference;
  auto compiler = makeCompiler();
  ASSERT_TRUE(compiler);
  CpuCompiler *raw = compiler.get();
  runtime::LazyBackendOptions o;
  o.compiler = std::move(compiler);
  runtime::LazyBackend cpu(std::move(o));
  auto refDecoder = model::Decoder::create(reference, weights);
  auto cpuDecoder = model::Decoder::create(cpu, weights);
  ASSERT_TRUE(refDecoder.ok() && cpuDecoder.ok());
  uint32_t token = 1;
  for (uint32_t pos = 0; pos < steps; ++pos) {
    double before = raw->stats().compileSeconds;
    auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<float>> got = (*cpuDecoder)->step(token, pos);
    double stepSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    absl::StatusOr<std::vector<float>> want = (*refDecoder)->step(token, pos);
    ASSERT_TRUE(got.ok() && want.ok());
    expectNmse(*got, *want, kF32Tolerance, std::string(what) + " pos " + std::to_string(pos));
    if (pos < 2)
      std::printf("%s pos %u: step %.1f ms, of which compile %.1f ms (%llu kernels so far)\n", what,
                  pos, stepSeconds * 1e3, (raw->stats().compileSeconds - before) * 1e3,
                  static_cast<unsigned long long>(raw->stats().kernelsCompiled));
    token = uint32_t(std::max_element(want->begin(), want->end()) - want->begin());
  }
  codegen::CpuJitTimes t = raw->stats().jit;
  std::printf("%s: %llu kernels in %llu modules; build %.1f ms, lower %.1f ms, O3 %.1f ms, "
              "codegen %.1f ms\n",
              what, static_cast<unsigned long long>(t.kernels),
              static_cast<unsigned long long>(t.modules), t.build * 1e3, t.lower * 1e3,
              t.optimize * 1e3, t.codegen * 1e3);
  // SEMANTICS-level targets are 300 ms (stories260K) on the CI machine; this bound only catches
  // an order-of-magnitude regression on a loaded machine.
  EXPECT_LT(raw->stats().compileSeconds, 5.0);
}

TEST(CpuCompilerTest, Stories260KDecodesLikeTheReference) {
  absl::StatusOr<model::ModelWeights> weights = model::loadLlama2c(modelPath());
  if (!weights.ok())
    GTEST_SKIP() << "stories260K not available: " << weights.status();
  decodeAndCompare(*weights, "stories260K", 6);
}

TEST(CpuCompilerTest, SyntheticQ4KModelDecodesLikeTheReference) {
  model::SyntheticOptions so;
  so.dtype = DType::Q4_K;
  so.withVocab = false;
  absl::StatusOr<model::ModelWeights> weights = model::generatePreset("micro", so);
  ASSERT_TRUE(weights.ok()) << weights.status();
  decodeAndCompare(*weights, "micro q4_k", 4);
}

// The program of one attention kernel: `heads` groups of score, softmax, value over slots q 0,
// K 1, scores 2, V 3, out 4 (grouped-query: two q heads per KV head).
KernelProgram attentionProgram(uint32_t heads, uint32_t headDim, uint32_t seq, uint32_t kvStride) {
  Kernel kernel;
  kernel.name = "attention";
  for (uint32_t h = 0; h < heads; ++h) {
    uint32_t kvOffset = (h / 2) * headDim;
    for (const OpCall &op :
         {ops::attnScore(slot(0), slot(1), slot(2), headDim, seq, h * headDim, kvOffset, kvStride),
          ops::softmax(slot(2), slot(2), seq),
          ops::attnValue(slot(2), slot(3), slot(4), headDim, seq, kvOffset, kvStride,
                         h * headDim)}) {
      KernelMember m;
      m.entry.op = op;
      kernel.ops.push_back(m);
    }
  }
  KernelProgram program;
  program.kernels.push_back(kernel);
  return program;
}

// Attention over heads as one parallel loop: every head's output as the unfused order computes
// it, and the shared scores buffer left holding the last head's softmax weights.
TEST(CpuCompilerTest, AttentionRunsAsOneLoopOverHeads) {
  ThreadPool pool(3);
  auto compiler = makeCompiler(splittingOptions(pool));
  ASSERT_TRUE(compiler);
  const uint32_t heads = 8, headDim = 64, seq = 37, kvStride = 4 * headDim;
  KernelProgram program = attentionProgram(heads, headDim, seq, kvStride);
  auto plan = compiler->compileProgram(program);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(compiler->stats().headLoops, 1u);
  EXPECT_THAT((*plan)->describe(), HasSubstr("one parallel loop over 8 heads"));
  std::mt19937 rng(5);
  OpBuffers out;
  out.bytes = {floatBytes(randomFloats(heads * headDim, rng)),
               floatBytes(randomFloats(seq * kvStride, rng)), poisonBytes(seq * 4 + 64),
               floatBytes(randomFloats(seq * kvStride, rng)), poisonBytes(heads * headDim * 4)};
  OpBuffers ref = out, serial = out;
  ASSERT_TRUE(runPlan(**plan, out).ok());
  for (const KernelMember &m : program.kernels[0].ops)
    runReference(m.entry.op, ref);
  expectNmse(bytesFloats(out.bytes[4]), bytesFloats(ref.bytes[4]));
  std::vector<float> scores = bytesFloats(out.bytes[2]), refScores = bytesFloats(ref.bytes[2]);
  scores.resize(seq);
  refScores.resize(seq);
  expectNmse(scores, refScores);
  // Against the same kernels run one op after another: identical bytes.
  CpuCompilerOptions serialOptions;
  serialOptions.pool = &pool;
  serialOptions.minParallelBytes = ~uint64_t(0);
  auto serialCompiler = makeCompiler(serialOptions);
  auto serialPlan = serialCompiler->compileProgram(program);
  ASSERT_TRUE(serialPlan.ok()) << serialPlan.status();
  ASSERT_TRUE(runPlan(**serialPlan, serial).ok());
  EXPECT_EQ(out.bytes[2], serial.bytes[2]) << "scores buffer";
  EXPECT_EQ(out.bytes[4], serial.bytes[4]) << "attention output";
}

// A fused decode with every kernel split across a pool of 3 (minParallelBytes 0), so attention
// runs as one loop over the heads and each quantized_matmul group as one loop over its rows with
// the epilogues inside the tasks: the logits must equal the unfused cpu backend's bit for bit
// (the same kernels on the same data, in an order that changes nothing), and the plans must have
// taken both loops.
void decodeFusedLikeUnfused(const model::ModelWeights &weights, const char *what, uint32_t steps,
                            bool prologue) {
  ThreadPool pool(3);
  std::shared_ptr<CpuCompiler> compiler = makeCompiler(splittingOptions(pool, prologue));
  ASSERT_TRUE(compiler);
  BackendOptions fusedOptions, unfusedOptions;
  fusedOptions.fusion = true;
  unfusedOptions.fusion = false;
  auto fused = createCpuBackend(fusedOptions, compiler);
  auto unfused = createCpuBackend(unfusedOptions, CpuCompilerOptions{});
  ASSERT_TRUE(fused.ok() && unfused.ok());
  auto fusedDecoder = model::Decoder::create(**fused, weights);
  auto unfusedDecoder = model::Decoder::create(**unfused, weights);
  ASSERT_TRUE(fusedDecoder.ok() && unfusedDecoder.ok());
  uint32_t token = 1;
  for (uint32_t pos = 0; pos < steps; ++pos) {
    absl::StatusOr<std::vector<float>> got = (*fusedDecoder)->step(token, pos);
    absl::StatusOr<std::vector<float>> want = (*unfusedDecoder)->step(token, pos);
    ASSERT_TRUE(got.ok() && want.ok());
    ASSERT_EQ(got->size(), want->size());
    size_t differing = 0;
    for (size_t i = 0; i < got->size(); ++i)
      differing += std::memcmp(&(*got)[i], &(*want)[i], sizeof(float)) != 0;
    EXPECT_EQ(differing, 0u) << what << " pos " << pos;
    token = uint32_t(std::max_element(want->begin(), want->end()) - want->begin());
  }
  EXPECT_GT(compiler->stats().headLoops, 0u) << what;
  EXPECT_GT(compiler->stats().rowLoops, 0u) << what;
  EXPECT_GT(compiler->stats().fusedKernels, 0u) << what;
}

TEST(CpuCompilerTest, FusedLoopsDecodeMicroLikeUnfused) {
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  absl::StatusOr<model::ModelWeights> weights = model::generatePreset("micro", so);
  ASSERT_TRUE(weights.ok()) << weights.status();
  decodeFusedLikeUnfused(*weights, "micro q4_0", 5, /*prologue=*/false);
  decodeFusedLikeUnfused(*weights, "micro q4_0 (rms_norm prologue)", 5, /*prologue=*/true);
}

TEST(CpuCompilerTest, FusedLoopsDecodeStories260KLikeUnfused) {
  absl::StatusOr<model::ModelWeights> weights = model::loadLlama2c(modelPath());
  if (!weights.ok())
    GTEST_SKIP() << "stories260K not available: " << weights.status();
  decodeFusedLikeUnfused(*weights, "stories260K", 5, /*prologue=*/false);
  decodeFusedLikeUnfused(*weights, "stories260K (rms_norm prologue)", 5, /*prologue=*/true);
}

} // namespace
} // namespace sinter::test
