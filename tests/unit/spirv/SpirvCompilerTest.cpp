// SpirvCompilerTest.cpp - tests codegen/spirv/ without a device: every op (and every Supported
// dtype of quantized_matmul) builds into SPIR-V that the SPIRV-Tools validator accepts, with the
// bindings, push constants, workgroup size and grid the runtime relies on.
#include <string>

#include "absl/strings/match.h"
#include "codegen/KernelSpec.h"
#include "codegen/spirv/SpirvCompiler.h"
#include "sinter/DType.h"
#include "support/Ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::codegen {
namespace {

using ::testing::HasSubstr;

BufferHandle h(uint64_t id) { return BufferHandle{id}; }

/// One call of every op kind, with the shapes of a small decoder layer.
std::vector<OpCall> everyOp() {
  return {
      ops::matmul(h(1), h(2), h(3), 3, 37, 19),
      ops::softmax(h(1), h(2), 1000),
      ops::rmsNorm(h(1), h(2), h(3), 288, 1e-5f),
      ops::rope(h(1), h(2), 7, 64, 10000.0f, 6, 2),
      ops::silu(h(1), h(2), 1000),
      ops::elementMul(h(1), h(2), h(3), 1000),
      ops::add(h(1), h(2), h(3), 1000),
      ops::copyBuffer(h(1), h(2), 1030),
      ops::copyBufferOffset(h(1), h(2), 6, 1027, 513),
      ops::attnScore(h(1), h(2), h(3), 64, 17, 64, 128, 256),
      ops::attnValue(h(1), h(2), h(3), 64, 17, 128, 256, 64),
      ops::quantizedMatmul(h(1), h(2), h(3), 100, 512, DType::Q4_0),
  };
}

std::vector<DType> supportedWeights() {
  std::vector<DType> out;
  for (uint32_t id = 0; id < 40; ++id) {
    const DTypeInfo *info = lookupDType(id);
    if (info && info->support == DTypeSupport::Supported)
      out.push_back(info->dtype);
  }
  return out;
}

SpirvTarget target(uint32_t subgroup = 32) {
  SpirvTarget t;
  t.subgroupSize = subgroup;
  return t;
}

TEST(SpirvCompilerTest, EveryOpBuildsAndValidates) {
  static_assert(kNumOpKinds == 12, "add the new op to everyOp()");
  for (uint32_t subgroup : {8u, 32u}) {
    for (const OpCall &op : everyOp()) {
      KernelSpec spec = singleOpSpec(op, 0);
      absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, target(subgroup));
      ASSERT_TRUE(k.ok()) << describeOp(op) << ": " << k.status();
      EXPECT_TRUE(validateSpirv(k->words).ok()) << describeOp(op);
      EXPECT_EQ(k->words[0], 0x07230203u) << "SPIR-V magic";
      EXPECT_EQ(k->kind, op.kind);
      EXPECT_EQ(k->name, spec.name());
      EXPECT_EQ(k->entryPoint, "main");
      const OpInfo &info = opInfo(op.kind);
      EXPECT_EQ(k->numBindings(), info.numBuffers) << describeOp(op);
      ASSERT_EQ(k->pushConstantInts.size(), info.numInts) << describeOp(op);
      for (size_t j = 0; j < k->pushConstantInts.size(); ++j) {
        EXPECT_EQ(k->pushConstantInts[j], j);
        EXPECT_EQ(k->pushConstantMembers[j], 0);
      }
      for (size_t j = 0; j < k->bindings.size(); ++j) {
        EXPECT_EQ(k->bindingOperands[j], j);
        EXPECT_EQ(k->bindingMembers[j], 0);
      }
      EXPECT_EQ(k->anchorMember, 0);
      EXPECT_EQ(k->pushConstantBytes(), 4u * info.numInts);
      EXPECT_GE(k->localSize[0], subgroup) << describeOp(op);
      EXPECT_EQ(k->localSize[0] % subgroup, 0u) << describeOp(op);
      EXPECT_EQ(k->localSize[1], 1u);
    }
  }
}

TEST(SpirvCompilerTest, QuantizedMatmulBuildsForEverySupportedDType) {
  std::vector<DType> dtypes = supportedWeights();
  ASSERT_GE(dtypes.size(), 13u) << "SEMANTICS.md lists 13 supported weight formats";
  for (DType dtype : dtypes) {
    uint32_t block = dtypeInfo(dtype).blockSize;
    // A static n_cols, and one read at run time (a Plan parameter).
    for (uint8_t paramMask : {uint8_t(0), uint8_t(0b10)}) {
      OpCall op = ops::quantizedMatmul(h(1), h(2), h(3), 64, 1024, dtype);
      if (block == 1)
        op.ints[1] = 70; // a pseudo-block remainder for the scalar formats
      KernelSpec spec = singleOpSpec(op, paramMask);
      absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, target());
      ASSERT_TRUE(k.ok()) << dtypeName(dtype) << ": " << k.status();
      EXPECT_TRUE(validateSpirv(k->words).ok()) << dtypeName(dtype);
      ASSERT_EQ(k->bindings.size(), 3u);
      EXPECT_EQ(k->bindings[0], SpirvBindingKind::Word);
      EXPECT_EQ(k->bindings[1], SpirvBindingKind::Vec4);
      EXPECT_EQ(k->bindings[2], SpirvBindingKind::F32);
    }
  }
}

TEST(SpirvCompilerTest, UnsupportedDTypeIsUnimplemented) {
  OpCall op = ops::quantizedMatmul(h(1), h(2), h(3), 4, 256, DType::Q8_K);
  absl::StatusOr<SpirvKernel> k = buildSpirvKernel(singleOpSpec(op, 0), target());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(k.status().message(), HasSubstr("Q8_K"));
}

TEST(SpirvCompilerTest, UnsupportedFusedSpecsAreUnimplemented) {
  KernelSpec softmaxAnchor = singleOpSpec(ops::softmax(h(1), h(2), 64), 0);
  softmaxAnchor.epilogue.push_back(shapeOf(ops::add(h(2), h(4), h(5), 64), 0));
  KernelSpec twoNorms = singleOpSpec(ops::quantizedMatmul(h(1), h(2), h(3), 4, 64, DType::Q4_0), 0);
  twoNorms.prologue.push_back(shapeOf(ops::rmsNorm(h(4), h(5), h(2), 64, 1e-5f), 0));
  twoNorms.prologue.push_back(twoNorms.prologue[0]);
  for (const KernelSpec &spec : {softmaxAnchor, twoNorms}) {
    absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, target());
    ASSERT_FALSE(k.ok());
    EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << k.status();
  }
}

TEST(SpirvCompilerTest, FusedKernelBindsEveryMember) {
  // rms_norm(x=4, g=5, xn=2) -> quantized_matmul(W=1, xn=2, y=3) -> add(y=3, r=6, out=7)
  KernelSpec spec = singleOpSpec(ops::quantizedMatmul(h(1), h(2), h(3), 64, 256, DType::Q4_0), 0);
  spec.prologue.push_back(shapeOf(ops::rmsNorm(h(4), h(5), h(2), 256, 1e-5f), 0));
  spec.epilogue.push_back(shapeOf(ops::add(h(3), h(6), h(7), 64), 0));
  absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, target());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(validateSpirv(k->words).ok());
  EXPECT_EQ(k->anchorMember, 1);
  EXPECT_EQ(k->kind, OpKind::QuantizedMatmul);
  ASSERT_EQ(k->numBindings(), 9u);
  EXPECT_EQ(k->bindingMembers, (std::vector<uint8_t>{0, 0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(k->bindingOperands, (std::vector<uint8_t>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(k->bindings[0], SpirvBindingKind::Vec4); // the norm's input feeds the products
  EXPECT_EQ(k->bindings[3], SpirvBindingKind::Word); // W
  EXPECT_EQ(k->pushConstantMembers, (std::vector<uint8_t>{0, 1, 1, 2}));
  EXPECT_EQ(k->pushConstantInts, (std::vector<uint8_t>{0, 0, 1, 0}));
  std::array<int64_t, 5> anchorInts{64, 256, 0, 0, 0};
  // Split blocks: 256 columns are 8 blocks of 4 quant words, a word per lane, so a row takes all
  // 32 lanes; 4 subgroups with 2 rows each.
  EXPECT_EQ(k->unitsPerGroup, 8u);
  EXPECT_EQ(k->grid(anchorInts.data()), (std::array<uint32_t, 3>{8, 1, 1}));
  // A pair of blocks per lane instead: 4 steps, clusters of 4 lanes, 32 of them with 2 rows each.
  SpirvTarget pairs = target();
  pairs.qmatmulSplitBlocks = false;
  absl::StatusOr<SpirvKernel> p = buildSpirvKernel(spec, pairs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->unitsPerGroup, 64u);
  EXPECT_EQ(p->grid(anchorInts.data()), (std::array<uint32_t, 3>{1, 1, 1}));
}

// A kernel binding more storage buffers than the device allows a stage (the parameter buffer
// counted) is refused as unimplemented, so the runtime plans its launches again smaller.
TEST(SpirvCompilerTest, KernelsPastTheStorageBufferLimitAreUnimplemented) {
  // rms_norm -> quantized_matmul -> add: 9 buffers, and the parameter buffer with paramsInBuffer.
  KernelSpec spec = singleOpSpec(ops::quantizedMatmul(h(1), h(2), h(3), 64, 256, DType::Q4_0), 0);
  spec.prologue.push_back(shapeOf(ops::rmsNorm(h(4), h(5), h(2), 256, 1e-5f), 0));
  spec.epilogue.push_back(shapeOf(ops::add(h(3), h(6), h(7), 64), 0));
  SpirvTarget t = target();
  t.maxStorageBuffers = 9;
  absl::StatusOr<SpirvKernel> fits = buildSpirvKernel(spec, t);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->numBindings(), 9u);
  t.maxStorageBuffers = 8;
  absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, t);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(k.status().message(), HasSubstr("binds 9 storage buffers, the device at most 8"));
  // n_rows as a parameter: the parameter buffer is the tenth.
  KernelSpec dynamic = spec;
  dynamic.anchor.staticMask &= ~uint8_t{1};
  t.maxStorageBuffers = 9;
  t.paramsInBuffer = true;
  absl::StatusOr<SpirvKernel> withParams = buildSpirvKernel(dynamic, t);
  ASSERT_FALSE(withParams.ok());
  EXPECT_THAT(withParams.status().message(), HasSubstr("binds 10 storage buffers"));
  t.maxStorageBuffers = 10;
  withParams = buildSpirvKernel(dynamic, t);
  ASSERT_TRUE(withParams.ok()) << withParams.status();
  EXPECT_EQ(withParams->numBindings(), 10u);
}

// A target with int8 x (integer dot products, room for x in workgroup memory) and `units`
// compute units; force 1 / 0 turns the W prefetch on / off, -1 leaves the default rule.
SpirvTarget int8Target(uint32_t units, int force) {
  SpirvTarget t = target(32);
  t.intDot = true;
  t.maxSharedMemoryBytes = 49152;
  t.computeUnits = units;
  if (force >= 0)
    t.qmatmulPrefetch = t.qmatmulPrefetchSmallGrids = force == 1;
  return t;
}

// int8 x: by default a product whose grid takes at most one workgroup a compute unit loads its
// first batch of W before quantizing x (the kernel `prefetch=1` builds); a larger grid, or an
// unknown row count or unit count, does not (the kernel `prefetch=0` builds).
TEST(SpirvCompilerTest, PrefetchIsChosenForSmallGrids) {
  auto build = [](uint32_t rowsHint, uint32_t units, int force) {
    SpirvTarget t = int8Target(units, force);
    KernelSpec spec =
        singleOpSpec(ops::quantizedMatmul(h(1), h(2), h(3), 4096, 4096, DType::Q4_0), 0);
    spec.rowsHint = rowsHint;
    absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, t);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? k->words : std::vector<uint32_t>{};
  };
  const std::vector<uint32_t> early = build(0, 0, 1), late = build(0, 0, 0);
  ASSERT_NE(early, late);
  // 16 subgroups of 1 row a workgroup: 1024 rows are 64 workgroups, 2048 rows 128.
  EXPECT_EQ(build(1024, 132, -1), early) << "64 workgroups on 132 units";
  EXPECT_EQ(build(1024, 64, -1), early);
  EXPECT_EQ(build(1024, 63, -1), late) << "more workgroups than units";
  EXPECT_EQ(build(2048, 132, -1), early) << "128 workgroups on 132 units";
  EXPECT_EQ(build(2049, 128, -1), late) << "129 workgroups on 128 units";
  EXPECT_EQ(build(4096, 132, -1), late) << "256 workgroups on 132 units";
  EXPECT_EQ(build(11008, 132, -1), late);
  EXPECT_EQ(build(0, 132, -1), late) << "rows unknown";
  EXPECT_EQ(build(1024, 0, -1), late) << "units unknown";
  EXPECT_EQ(build(1024, 132, 0), late) << "prefetch=0";
  EXPECT_EQ(build(11008, 132, 1), early) << "prefetch=1";
}

// Stacked products choose the prefetch for their whole grid: three 1024-row products are 192
// workgroups, more than 132 units, although the first alone (64) is not.
TEST(SpirvCompilerTest, StackedProductsChoosePrefetchForTheWholeGrid) {
  auto build = [](uint32_t units, int force, int products) {
    SpirvTarget t = int8Target(units, force);
    KernelSpec spec =
        singleOpSpec(ops::quantizedMatmul(h(1), h(2), h(3), 1024, 4096, DType::Q4_0), 0);
    spec.prologue.push_back(shapeOf(ops::rmsNorm(h(4), h(5), h(2), 4096, 1e-5f), 0));
    for (int p = 1; p < products; ++p)
      spec.epilogue.push_back(shapeOf(
          ops::quantizedMatmul(h(10 + 2 * p), h(2), h(11 + 2 * p), 1024, 4096, DType::Q4_0), 0));
    // Stacked products have static row counts (the grid is fixed at build time).
    for (OpShape *s : {&spec.anchor, &spec.epilogue[0], &spec.epilogue.back()}) {
      s->staticMask |= 1;
      s->ints[0] = 1024;
    }
    spec.stackedProducts = true;
    spec.rowsHint = 1024;
    absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, t);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? k->words : std::vector<uint32_t>{};
  };
  const std::vector<uint32_t> early = build(132, 1, 3), late = build(132, 0, 3);
  ASSERT_NE(early, late);
  EXPECT_EQ(build(132, -1, 3), late) << "192 workgroups on 132 units";
  EXPECT_EQ(build(192, -1, 3), early) << "192 workgroups on 192 units";
  EXPECT_EQ(build(127, -1, 2), build(127, 0, 2)) << "128 workgroups on 127 units";
  EXPECT_EQ(build(132, -1, 2), build(132, 1, 2)) << "128 workgroups on 132 units";
}

TEST(SpirvCompilerTest, InjectedFailureIsAnError) {
  KernelSpec spec = singleOpSpec(ops::silu(h(1), h(2), 16), 0);
  spec.injectFailure = true;
  absl::StatusOr<SpirvKernel> k = buildSpirvKernel(spec, target());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(k.status().message(), HasSubstr("silu"));
}

TEST(SpirvCompilerTest, BadSubgroupSizeIsRejected) {
  absl::StatusOr<SpirvKernel> k =
      buildSpirvKernel(singleOpSpec(ops::silu(h(1), h(2), 16), 0), target(24));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpirvCompilerTest, ValidatorRejectsGarbage) {
  std::vector<uint32_t> words = {0x07230203u, 0x00010300u, 0, 1, 0, 12345};
  absl::Status s = validateSpirv(words);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(disassembleSpirv({1, 2, 3}).ok());
}

TEST(SpirvCompilerTest, DisassemblyNamesTheEntryPointAndPushConstants) {
  absl::StatusOr<SpirvKernel> k =
      buildSpirvKernel(singleOpSpec(ops::add(h(1), h(2), h(3), 100), 0), target());
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<std::string> text = disassembleSpirv(k->words);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("OpEntryPoint GLCompute"));
  EXPECT_THAT(*text, HasSubstr("PushConstant"));
  EXPECT_THAT(*text, HasSubstr("LocalSize 64 1 1"));
}

// Where the device can keep f32 subnormals (shaderDenormPreserveFloat32), every kernel asks for
// it; elsewhere the module declares nothing of float controls.
TEST(SpirvCompilerTest, KernelsKeepSubnormalsWhereTheDeviceCan) {
  SpirvTarget t = target();
  for (bool preserve : {false, true}) {
    t.denormPreserve = preserve;
    for (const OpCall &op :
         {ops::add(h(1), h(2), h(3), 100), ops::rmsNorm(h(1), h(2), h(3), 256, 1e-5f)}) {
      absl::StatusOr<SpirvKernel> k = buildSpirvKernel(singleOpSpec(op, 0), t);
      ASSERT_TRUE(k.ok()) << k.status();
      absl::StatusOr<std::string> text = disassembleSpirv(k->words);
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_EQ(absl::StrContains(*text, "OpCapability DenormPreserve"), preserve) << *text;
      EXPECT_EQ(absl::StrContains(*text, "OpExtension \"SPV_KHR_float_controls\""), preserve);
      EXPECT_EQ(absl::StrContains(*text, "OpExecutionMode %main DenormPreserve 32"), preserve);
      EXPECT_TRUE(validateSpirv(k->words).ok());
    }
  }
}

TEST(SpirvCompilerTest, GridCoversTheParallelDimension) {
  SpirvTarget t = target(32);
  auto build = [&](const OpCall &op) {
    absl::StatusOr<SpirvKernel> k = buildSpirvKernel(singleOpSpec(op, 0), t);
    EXPECT_TRUE(k.ok()) << k.status();
    return *k;
  };
  auto ints = [](const OpCall &op) {
    std::array<int64_t, 5> v{};
    for (int i = 0; i < 5; ++i)
      v[i] = static_cast<int64_t>(op.ints[i]);
    return v;
  };
  // quantized_matmul: 4 subgroups of 2 rows per 128-invocation workgroup; 1 row per subgroup
  // for the scalar formats.
  OpCall qm = ops::quantizedMatmul(h(1), h(2), h(3), 4097, 8192, DType::Q8_0);
  SpirvKernel k = build(qm);
  EXPECT_EQ(k.unitsPerGroup, 8u);
  EXPECT_EQ(k.grid(ints(qm).data()), (std::array<uint32_t, 3>{513, 1, 1}));
  qm.dtype = DType::F16;
  EXPECT_EQ(build(qm).unitsPerGroup, 4u);
  // A 4096-column Q4_K row is 16 blocks: 16 lanes per row, 2 rows per subgroup.
  qm.dtype = DType::Q4_K;
  qm.ints[1] = 4096;
  EXPECT_EQ(build(qm).unitsPerGroup, 8u);
  // n_cols at run time: one row per full subgroup.
  absl::StatusOr<SpirvKernel> dynamic = buildSpirvKernel(singleOpSpec(qm, 0b10), t);
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_EQ(dynamic->unitsPerGroup, 4u);
  // element-wise: one element per invocation.
  OpCall add = ops::add(h(1), h(2), h(3), 1000);
  k = build(add);
  EXPECT_EQ(k.grid(ints(add).data()), (std::array<uint32_t, 3>{16, 1, 1}));
  add.ints[0] = 0;
  EXPECT_EQ(k.grid(ints(add).data()), (std::array<uint32_t, 3>{0, 0, 0}));
  // more than 65535 workgroups fold into y.
  add.ints[0] = 64ull * 70000;
  EXPECT_EQ(k.grid(ints(add).data()), (std::array<uint32_t, 3>{65535, 2, 1}));
  // row reductions and copies: one workgroup.
  OpCall sm = ops::softmax(h(1), h(2), 5000);
  EXPECT_EQ(build(sm).grid(ints(sm).data()), (std::array<uint32_t, 3>{1, 1, 1}));
  OpCall cp = ops::copyBufferOffset(h(1), h(2), 3, 5, 100000);
  EXPECT_EQ(build(cp).grid(ints(cp).data()), (std::array<uint32_t, 3>{1, 1, 1}));
  // rope: one invocation per (head, pair).
  OpCall rope = ops::rope(h(1), h(2), 3, 64, 10000.0f, 8, 4);
  EXPECT_EQ(build(rope).grid(ints(rope).data()), (std::array<uint32_t, 3>{6, 1, 1}));
}

TEST(SpirvCompilerTest, UnitsMatchTheSchedule) {
  int64_t qm[5] = {100, 512, 0, 0, 0};
  EXPECT_EQ(spirvUnits(OpKind::QuantizedMatmul, qm), 100u);
  int64_t mm[5] = {3, 5, 7, 0, 0};
  EXPECT_EQ(spirvUnits(OpKind::Matmul, mm), 15u);
  int64_t rope[5] = {1, 64, 8, 2, 0};
  EXPECT_EQ(spirvUnits(OpKind::Rope, rope), 320u);
  int64_t score[5] = {64, 17, 0, 0, 0};
  EXPECT_EQ(spirvUnits(OpKind::AttnScore, score), 17u);
  EXPECT_EQ(spirvUnits(OpKind::AttnValue, score), 64u);
}

} // namespace
} // namespace sinter::codegen
