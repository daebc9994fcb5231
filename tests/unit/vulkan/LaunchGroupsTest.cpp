// LaunchGroupsTest.cpp - how the Vulkan runtime splits fused kernels into generated launches
// (runtime/vulkan/LaunchGroups.h). No device needed: the matching is plain C++.
#include "runtime/vulkan/LaunchGroups.h"

#include <gtest/gtest.h>

namespace sinter::runtime::vulkan {
namespace {

BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

KernelMember member(const OpCall &op) {
  KernelMember m;
  m.entry.op = op;
  return m;
}

Kernel kernelOf(const std::vector<OpCall> &ops) {
  Kernel k;
  k.name = "test";
  for (const OpCall &op : ops)
    k.ops.push_back(member(op));
  return k;
}

using Kind = Launch::Kind;

// rms_norm(x=0, g=1, xn=2) -> Q, K, V (W 3/5/7 -> 4/6/8) -> rope -> K and V into their caches
// (9, 10), plus `extra` ops after.
Kernel projectionGroup(std::vector<OpCall> extra = {}) {
  std::vector<OpCall> ops{ops::rmsNorm(slot(0), slot(1), slot(2), 256, 1e-5f),
                          ops::quantizedMatmul(slot(3), slot(2), slot(4), 256, 256, DType::Q4_0),
                          ops::quantizedMatmul(slot(5), slot(2), slot(6), 64, 256, DType::Q4_0),
                          ops::quantizedMatmul(slot(7), slot(2), slot(8), 64, 256, DType::Q4_0),
                          ops::rope(slot(4), slot(6), 3, 64, 1e4f, 4, 1),
                          ops::copyBufferOffset(slot(6), slot(9), 0, 1024, 256),
                          ops::copyBufferOffset(slot(8), slot(10), 0, 1024, 256)};
  ops.insert(ops.end(), extra.begin(), extra.end());
  return kernelOf(ops);
}

uint32_t slotOf(const KernelMember &m, int operand) {
  return Trace::slotOf(m.entry.op.buffers[operand]);
}

TEST(LaunchGroupsTest, HorizontalProjectionsEachTakeTheNormOnlyTheFirstStoresIt) {
  LaunchOptions separate;
  separate.cacheTails = false;
  std::vector<Launch> l = planLaunches(projectionGroup(), separate);
  ASSERT_EQ(l.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(l[i].kind, Kind::Chain);
    ASSERT_EQ(l[i].members.size(), 2u);
    EXPECT_EQ(l[i].members[0].entry.op.kind, OpKind::RmsNorm);
    EXPECT_EQ(l[i].spec.prologue.size(), 1u);
    EXPECT_EQ(l[i].spec.unstoredOutputs, i == 0 ? 0u : 1u) << "launch " << i;
    EXPECT_FALSE(hasCacheTail(l[i]));
  }
  EXPECT_EQ(slotOf(l[1].members[1], 2), 6u);
  for (int i = 3; i < 6; ++i)
    EXPECT_EQ(l[i].kind, Kind::Single);
}

// Cache tails without stacked products: a launch per projection.
LaunchOptions apart() {
  LaunchOptions o;
  o.stackedProducts = false;
  return o;
}

TEST(LaunchGroupsTest, RopeAndCacheCopiesBecomeTheProjectionsEpilogues) {
  std::vector<Launch> l = planLaunches(projectionGroup(), apart());
  ASSERT_EQ(l.size(), 3u);
  // Q: norm, product, rope of Q's 4 heads only (k = q, no k heads).
  ASSERT_EQ(l[0].members.size(), 3u);
  const OpCall &ropeQ = l[0].members[2].entry.op;
  EXPECT_EQ(ropeQ.kind, OpKind::Rope);
  EXPECT_EQ(slotOf(l[0].members[2], 0), 4u);
  EXPECT_EQ(slotOf(l[0].members[2], 1), 4u);
  EXPECT_EQ(ropeQ.ints[2], 4u);
  EXPECT_EQ(ropeQ.ints[3], 0u);
  EXPECT_EQ(ropeQ.ints[0], 3u) << "pos";
  // K: norm, product, rope of K's head, copy into the K cache.
  ASSERT_EQ(l[1].members.size(), 4u);
  EXPECT_EQ(slotOf(l[1].members[2], 0), 6u);
  EXPECT_EQ(slotOf(l[1].members[2], 1), 6u);
  EXPECT_EQ(l[1].members[2].entry.op.ints[2], 1u);
  EXPECT_EQ(l[1].members[3].entry.op.kind, OpKind::CopyBufferOffset);
  EXPECT_EQ(slotOf(l[1].members[3], 1), 9u);
  // V: norm, product, copy into the V cache.
  ASSERT_EQ(l[2].members.size(), 3u);
  EXPECT_EQ(l[2].members[2].entry.op.kind, OpKind::CopyBufferOffset);
  EXPECT_EQ(slotOf(l[2].members[2], 1), 10u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(l[i].kind, Kind::Chain);
    EXPECT_TRUE(hasCacheTail(l[i]));
    EXPECT_EQ(l[i].spec.unstoredOutputs, i == 0 ? 0u : 1u) << "launch " << i;
    EXPECT_EQ(l[i].spec.epilogue.size(), l[i].members.size() - 2);
  }
  // An op after the group is left to its own launch.
  l = planLaunches(projectionGroup({ops::silu(slot(4), slot(11), 256)}), apart());
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[3].kind, Kind::Single);
}

TEST(LaunchGroupsTest, ProjectionsWithTheirTailsStackIntoOneLaunch) {
  std::vector<Launch> l = planLaunches(projectionGroup());
  ASSERT_EQ(l.size(), 1u);
  const Launch &s = l[0];
  EXPECT_EQ(s.kind, Kind::Chain);
  EXPECT_TRUE(s.spec.stackedProducts);
  EXPECT_TRUE(hasCacheTail(s));
  EXPECT_EQ(s.spec.unstoredOutputs, 0u) << "the one launch stores the norm";
  // norm, Q, rope(Q), K, rope(K), copy(K), V, copy(V), in the spec's member order.
  std::vector<OpKind> kinds{OpKind::RmsNorm,
                            OpKind::QuantizedMatmul,
                            OpKind::Rope,
                            OpKind::QuantizedMatmul,
                            OpKind::Rope,
                            OpKind::CopyBufferOffset,
                            OpKind::QuantizedMatmul,
                            OpKind::CopyBufferOffset};
  ASSERT_EQ(s.members.size(), kinds.size());
  for (size_t m = 0; m < kinds.size(); ++m)
    EXPECT_EQ(s.members[m].entry.op.kind, kinds[m]) << "member " << m;
  ASSERT_EQ(s.spec.prologue.size(), 1u);
  ASSERT_EQ(s.spec.epilogue.size(), 6u);
  EXPECT_EQ(slotOf(s.members[4], 0), 6u) << "K's rope rotates K's rows";
  EXPECT_EQ(s.members[4].entry.op.ints[2], 1u);
  EXPECT_EQ(slotOf(s.members[7], 1), 10u) << "V's copy goes to the V cache";
  // The products' row counts are baked in (the grid is fixed when the kernel is built).
  std::vector<codegen::StackedSegment> segments = codegen::stackedSegments(s.spec);
  ASSERT_EQ(segments.size(), 3u);
  std::vector<int> firstMembers{1, 3, 6};
  std::vector<size_t> tails{1, 2, 1};
  std::vector<int64_t> rows{256, 64, 64};
  for (size_t g = 0; g < 3; ++g) {
    EXPECT_EQ(segments[g].member, firstMembers[g]) << "segment " << g;
    EXPECT_EQ(segments[g].tail.size(), tails[g]) << "segment " << g;
    EXPECT_TRUE(segments[g].product->isStatic(0)) << "segment " << g;
    EXPECT_EQ(segments[g].product->ints[0], rows[g]) << "segment " << g;
  }
  // A product whose row count is a run-time parameter, or of another format: a launch each.
  // (A run-time row count also keeps the tails apart.)
  Kernel k = projectionGroup();
  k.ops[2].paramOf[0] = 0;
  l = planLaunches(k);
  EXPECT_EQ(l.size(), 6u);
  for (const Launch &one : l)
    EXPECT_FALSE(one.spec.stackedProducts);
  k = projectionGroup();
  k.ops[3].entry.op.dtype = DType::Q8_0;
  l = planLaunches(k);
  EXPECT_EQ(l.size(), 3u);
  for (const Launch &one : l)
    EXPECT_FALSE(one.spec.stackedProducts);
}

TEST(LaunchGroupsTest, CacheCopiesThatAreNotAWholeProjectionStayApart) {
  auto base = [](std::vector<OpCall> tail) {
    std::vector<OpCall> ops{ops::rmsNorm(slot(0), slot(1), slot(2), 256, 1e-5f),
                            ops::quantizedMatmul(slot(3), slot(2), slot(4), 256, 256, DType::Q4_0),
                            ops::quantizedMatmul(slot(5), slot(2), slot(6), 64, 256, DType::Q4_0)};
    ops.insert(ops.end(), tail.begin(), tail.end());
    return planLaunches(kernelOf(ops), apart());
  };
  // Part of a projection, from an offset, into a buffer the group reads (x, the norm's
  // weight, a weight), or a second copy of one projection: launched on their own.
  for (const OpCall &copy : {ops::copyBufferOffset(slot(6), slot(9), 0, 0, 128),
                             ops::copyBufferOffset(slot(6), slot(9), 4, 0, 252),
                             ops::copyBufferOffset(slot(6), slot(0), 0, 0, 256),
                             ops::copyBufferOffset(slot(6), slot(1), 0, 0, 256),
                             ops::copyBufferOffset(slot(6), slot(3), 0, 0, 256),
                             ops::copyBufferOffset(slot(6), slot(4), 0, 0, 256),
                             ops::copyBufferOffset(slot(9), slot(10), 0, 0, 256)}) {
    std::vector<Launch> l = base({copy});
    ASSERT_EQ(l.size(), 3u) << describeOp(copy);
    EXPECT_FALSE(hasCacheTail(l[0]) || hasCacheTail(l[1])) << describeOp(copy);
    EXPECT_EQ(l[2].kind, Kind::Single) << describeOp(copy);
  }
  std::vector<Launch> l = base({ops::copyBufferOffset(slot(6), slot(9), 0, 0, 256),
                                ops::copyBufferOffset(slot(6), slot(10), 0, 0, 256)});
  ASSERT_EQ(l.size(), 3u);
  EXPECT_TRUE(hasCacheTail(l[1]));
  EXPECT_EQ(l[2].kind, Kind::Single) << "one copy a projection";
  // Two copies into one cache: the second stays apart.
  l = base({ops::copyBufferOffset(slot(4), slot(9), 0, 0, 1024),
            ops::copyBufferOffset(slot(6), slot(9), 0, 1024, 256)});
  ASSERT_EQ(l.size(), 3u);
  EXPECT_TRUE(hasCacheTail(l[0]));
  EXPECT_EQ(l[2].kind, Kind::Single);
  // A rope whose heads do not cover the projections' rows is not split, and the copies behind
  // it stay behind it.
  l = base({ops::rope(slot(4), slot(6), 3, 64, 1e4f, 2, 1),
            ops::copyBufferOffset(slot(6), slot(9), 0, 0, 256)});
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[2].members[0].entry.op.kind, OpKind::Rope);
  EXPECT_EQ(l[3].members[0].entry.op.kind, OpKind::CopyBufferOffset);
  // A copy whose destination offset is a run-time parameter is still taken (the kernel reads it).
  Kernel k = projectionGroup();
  k.ops[5].paramOf[1] = 0;
  l = planLaunches(k, apart());
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[1].members[3].paramOf[1], 0);
}

TEST(LaunchGroupsTest, ANormWritingItsInputOrWeightIsNotAPrologue) {
  // rms_norm(x=0, g=1, out=1): the fused kernel would read g while another workgroup writes it
  // (VulkanFuzzTest seeds 1303, 1346, 3030, 8425, 8947 of the long run found this).
  for (uint32_t out : {0u, 1u}) {
    Kernel k = kernelOf({ops::rmsNorm(slot(0), slot(1), slot(out), 64, 1e-5f),
                         ops::quantizedMatmul(slot(3), slot(out), slot(4), 64, 64, DType::F32)});
    std::vector<Launch> l = planLaunches(k);
    ASSERT_EQ(l.size(), 2u) << "out = slot " << out;
    EXPECT_EQ(l[0].kind, Kind::Single);
  }
}

// rms_norm -> gate (W 3 -> 4), up (W 5 -> 6) -> silu(4 -> 4) -> element_mul(4, 6 -> 4).
Kernel swiglu(DType gate = DType::Q8_0, DType up = DType::Q8_0) {
  return kernelOf({ops::rmsNorm(slot(0), slot(1), slot(2), 256, 1e-5f),
                   ops::quantizedMatmul(slot(3), slot(2), slot(4), 512, 256, gate),
                   ops::quantizedMatmul(slot(5), slot(2), slot(6), 512, 256, up),
                   ops::silu(slot(4), slot(4), 512),
                   ops::elementMul(slot(4), slot(6), slot(4), 512)});
}

TEST(LaunchGroupsTest, GateAndUpAreOneLaunchWithUpAsTheSiblingProduct) {
  std::vector<Launch> l = planLaunches(swiglu());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].kind, Kind::Chain);
  ASSERT_EQ(l[0].members.size(), 5u);
  EXPECT_EQ(Trace::slotOf(l[0].members[1].entry.op.buffers[2]), 4u) << "gate is the anchor";
  EXPECT_EQ(Trace::slotOf(l[0].members[2].entry.op.buffers[2]), 6u) << "up the sibling";
  EXPECT_TRUE(codegen::hasSiblingProduct(l[0].spec));
  EXPECT_EQ(l[0].spec.epilogue.size(), 3u);
  EXPECT_EQ(l[0].spec.unstoredOutputs, 0u) << "the one launch stores the norm";
  EXPECT_EQ(l[0].spec.rowsHint, 512u);
  // Two formats: two launches, up first.
  l = planLaunches(swiglu(DType::Q4_0, DType::Q8_0));
  ASSERT_EQ(l.size(), 2u);
  EXPECT_FALSE(codegen::hasSiblingProduct(l[1].spec));
  // A format without the split schedule: two launches.
  EXPECT_EQ(planLaunches(swiglu(DType::Q4_K, DType::Q4_K)).size(), 2u);
  // element_mul by something other than up's output: two launches.
  Kernel k = swiglu();
  k.ops[4].entry.op.buffers[1] = slot(7);
  EXPECT_EQ(planLaunches(k).size(), 2u);
  // An epilogue writing up's W: two launches.
  k = swiglu();
  k.ops[4].entry.op.buffers[2] = slot(5);
  EXPECT_EQ(planLaunches(k).size(), 2u);
}

TEST(LaunchGroupsTest, SwigluIsTheGatesEpilogueAndUpLaunchesFirst) {
  LaunchOptions apart;
  apart.siblingProducts = false;
  std::vector<Launch> l = planLaunches(swiglu(), apart);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(Trace::slotOf(l[0].members[1].entry.op.buffers[2]), 6u) << "up first";
  EXPECT_EQ(l[0].spec.unstoredOutputs, 0u);
  ASSERT_EQ(l[1].members.size(), 4u);
  EXPECT_EQ(Trace::slotOf(l[1].members[1].entry.op.buffers[2]), 4u);
  EXPECT_EQ(l[1].spec.epilogue.size(), 2u);
  EXPECT_EQ(l[1].spec.unstoredOutputs, 1u);
}

TEST(LaunchGroupsTest, ResidualAddChainsFromEitherOperand) {
  // quantized_matmul(W 0, x 1 -> 2) -> add(3, 2 -> 3): the chained value is add's b.
  Kernel k = kernelOf({ops::quantizedMatmul(slot(0), slot(1), slot(2), 64, 128, DType::Q4_0),
                       ops::add(slot(3), slot(2), slot(3), 64)});
  std::vector<Launch> l = planLaunches(k);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].kind, Kind::Chain);
  const OpCall &add = l[0].members[1].entry.op;
  EXPECT_EQ(Trace::slotOf(add.buffers[0]), 2u) << "operands swapped: the product first";
  EXPECT_EQ(Trace::slotOf(add.buffers[1]), 3u);
  // The residual (slot 3) is written only by the add itself: loaded at the kernel's start.
  EXPECT_EQ(l[0].spec.earlyInputs, 0b10u);
}

TEST(LaunchGroupsTest, EpilogueInputsThatAnEarlierMemberWritesAreNotLoadedEarly) {
  // (An epilogue input that the product or an earlier epilogue member writes is not fused at
  // all, EpilogueThatOverwritesWhatTheProductReadsIsNotFused; the norm's output is.)
  // The residual is the norm's output (written by the prologue's store): not early.
  std::vector<Launch> l;
  l = planLaunches(kernelOf({ops::rmsNorm(slot(0), slot(1), slot(2), 128, 1e-5f),
                             ops::quantizedMatmul(slot(3), slot(2), slot(4), 128, 128, DType::Q4_0),
                             ops::add(slot(4), slot(2), slot(5), 128)}));
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(l[0].members.size(), 3u);
  EXPECT_EQ(l[0].spec.earlyInputs, 0u);
  // silu(gate) * up with up from another launch: element_mul's second input is early.
  l = planLaunches(
      kernelOf({ops::quantizedMatmul(slot(0), slot(1), slot(2), 64, 128, DType::Q4_0),
                ops::silu(slot(2), slot(3), 64), ops::elementMul(slot(3), slot(6), slot(7), 64)}));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].spec.earlyInputs, 0b100u);
}

TEST(LaunchGroupsTest, EpilogueThatOverwritesWhatTheProductReadsIsNotFused) {
  // add writes x (slot 1) while other workgroups may still read it: two launches.
  Kernel k = kernelOf({ops::quantizedMatmul(slot(0), slot(1), slot(2), 64, 128, DType::Q4_0),
                       ops::add(slot(2), slot(3), slot(1), 64)});
  std::vector<Launch> l = planLaunches(k);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].kind, Kind::Single);
  // A size other than the product's rows does not fold in either.
  k = kernelOf({ops::quantizedMatmul(slot(0), slot(1), slot(2), 64, 128, DType::Q4_0),
                ops::add(slot(2), slot(3), slot(4), 32)});
  EXPECT_EQ(planLaunches(k).size(), 2u);
}

std::vector<OpCall> heads(uint32_t n, uint32_t group, uint32_t dim, uint32_t seq) {
  std::vector<OpCall> ops;
  uint32_t stride = n / group * dim;
  for (uint32_t h = 0; h < n; ++h) {
    uint32_t kv = h / group * dim;
    ops.push_back(ops::attnScore(slot(0), slot(1), slot(2), dim, seq, h * dim, kv, stride));
    ops.push_back(ops::softmax(slot(2), slot(2), seq));
    ops.push_back(ops::attnValue(slot(2), slot(3), slot(4), dim, seq, kv, stride, h * dim));
  }
  return ops;
}

TEST(LaunchGroupsTest, AttentionOverGroupedHeadsIsOneLaunch) {
  Kernel k = kernelOf(heads(8, 4, 64, 17));
  std::vector<Launch> l = planLaunches(k);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].kind, Kind::Attention);
  EXPECT_TRUE(l[0].spec.attentionOverHeads);
  EXPECT_EQ(l[0].headMembers.size(), 24u);
  std::array<uint32_t, 7> words{8, 4, 64, 64, 64, 64, 1};
  EXPECT_EQ(l[0].attentionWords, words);
}

TEST(LaunchGroupsTest, AHeadWhoseOffsetsAreNotAffineRunsAsItsMembers) {
  std::vector<OpCall> ops = heads(4, 1, 32, 9);
  ops[2].ints[4] = 5; // head 0 writes out at a stray offset
  std::vector<Launch> l = planLaunches(kernelOf(ops));
  ASSERT_EQ(l.size(), 4u) << "head 0's three members, then heads 1..3 as one launch";
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(l[i].kind, Kind::Single);
  EXPECT_EQ(l[3].kind, Kind::Attention);
  EXPECT_EQ(l[3].attentionWords[0], 3u);
  // Overlapping heads in out (a stride below head_dim) never fuse.
  ops = heads(2, 1, 32, 9);
  ops[5].ints[4] = 16;
  for (const Launch &launch : planLaunches(kernelOf(ops)))
    EXPECT_NE(launch.attentionWords[0], 2u);
}

TEST(LaunchGroupsTest, AttentionChecksAtRunTimeThatEveryHeadSeesTheSameSeqLen) {
  Kernel k = kernelOf(heads(2, 1, 16, 5));
  // seq_len of each head's score and value, and softmax's size, are Plan parameters 0..5.
  int p = 0;
  for (KernelMember &m : k.ops)
    m.paramOf[m.entry.op.kind == OpKind::Softmax ? 0 : 1] = p++;
  std::vector<Launch> l = planLaunches(k);
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(l[0].kind, Kind::Attention);
  std::vector<uint64_t> same(6, 9), differ{9, 9, 9, 9, 8, 9};
  EXPECT_TRUE(attentionUniform(l[0].headMembers, same));
  EXPECT_FALSE(attentionUniform(l[0].headMembers, differ));
  // The plan's precomputed form: every parameter once, compared without binding the members.
  SeqLenSources sources = seqLenSources(l[0].headMembers);
  EXPECT_EQ(sources.params, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(sources.hasConstant);
  EXPECT_TRUE(seqLensAgree(sources, same));
  EXPECT_FALSE(seqLensAgree(sources, differ));
  EXPECT_FALSE(seqLensAgree(sources, std::vector<uint64_t>(5, 9))) << "a parameter out of range";
}

TEST(LaunchGroupsTest, SeqLenSourcesMixParametersAndConstants) {
  // The members of two heads: head 0's three seq_len are parameter 3 (shared), head 1's stay
  // the constant 5 (planLaunches asks for head 0's kind everywhere; the check itself does not).
  Kernel k = kernelOf(heads(2, 1, 16, 5));
  ASSERT_EQ(k.ops.size(), 6u);
  for (size_t i = 0; i < 3; ++i)
    k.ops[i].paramOf[k.ops[i].entry.op.kind == OpKind::Softmax ? 0 : 1] = 3;
  SeqLenSources sources = seqLenSources(k.ops);
  EXPECT_EQ(sources.params, (std::vector<uint32_t>{3}));
  EXPECT_TRUE(sources.hasConstant);
  EXPECT_EQ(sources.constant, 5u);
  EXPECT_FALSE(sources.constantsDiffer);
  EXPECT_TRUE(seqLensAgree(sources, std::vector<uint64_t>{0, 0, 0, 5}));
  EXPECT_FALSE(seqLensAgree(sources, std::vector<uint64_t>{5, 5, 5, 6}));
  for (const std::vector<uint64_t> &params :
       {std::vector<uint64_t>{0, 0, 0, 5}, std::vector<uint64_t>{5, 5, 5, 6}})
    EXPECT_EQ(seqLensAgree(sources, params), attentionUniform(k.ops, params));
  // Constants that differ never agree.
  SeqLenSources differ;
  differ.hasConstant = true;
  differ.constant = 5;
  differ.constantsDiffer = true;
  EXPECT_FALSE(seqLensAgree(differ, {}));
}

} // namespace
} // namespace sinter::runtime::vulkan
