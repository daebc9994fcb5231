// SpirvKernelFixture.h - the fixture of the SpirvKernelTest binary (SpirvKernelTest.cpp: single-op
// kernels and the parameter buffer; SpirvFusedKernelTest.cpp: fused, stacked, sibling and attention
// kernels): builds a kernel for the machine's Vulkan device (lavapipe in CI), runs it under the
// Khronos validation layer on random inputs with poisoned outputs, and compares with
// executeReference.
#ifndef SINTER_TESTS_UNIT_SPIRV_SPIRVKERNELFIXTURE_H
#define SINTER_TESTS_UNIT_SPIRV_SPIRVKERNELFIXTURE_H

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "codegen/spirv/SpirvCompiler.h"
#include "tests/support/RangeRows.h"
#include "tests/unit/codegen/KernelHarness.h"
#include "tests/unit/spirv/VkRunner.h"

namespace sinter::test {

using codegen::SpirvKernel;
using codegen::SpirvTarget;

inline BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

inline std::string str(uint64_t v) { return std::to_string(v); }

class SpirvKernelTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<VkRunner>> r = VkRunner::create();
    if (!r.ok()) {
      skipReason_ = new std::string(r.status().ToString());
      return;
    }
    runner_ = r->release();
    std::printf("device: %s, subgroup size %u\n", runner_->deviceName().c_str(),
                runner_->subgroupSize());
    kernels_ = new std::map<std::string, SpirvKernel>();
  }
  static void TearDownTestSuite() {
    delete runner_;
    runner_ = nullptr;
    delete skipReason_;
    skipReason_ = nullptr;
    delete kernels_;
    kernels_ = nullptr;
  }
  void SetUp() override {
    if (!runner_)
      GTEST_SKIP() << "no usable Vulkan device: " << *skipReason_;
  }
  void TearDown() override {
    if (!runner_)
      return;
    for (const std::string &m : runner_->takeMessages())
      ADD_FAILURE() << "validation layer: " << m;
  }

  SpirvTarget target() const {
    SpirvTarget t;
    t.subgroupSize = runner_->subgroupSize();
    t.maxWorkgroupInvocations = std::min<uint32_t>(runner_->maxWorkgroupInvocations(), 1024);
    t.qmatmulSplitBlocks = split_;
    t.intDot = runner_->intDot();
    t.qmatmulIntDot = intDot_;
    t.maxSharedMemoryBytes = runner_->maxSharedMemory();
    t.attentionWorkgroup = attentionWorkgroup_;
    t.attentionSplits = attentionSplits_;
    t.qmatmulGroups = groups_;
    t.qmatmulWorkgroupRows = workgroupRows_;
    t.qmatmulLaneWords = laneWords_;
    t.paramsInBuffer = paramsInBuffer_;
    return t;
  }

  /// The kernel's integer words as push constants, or (SpirvKernel::paramsInBuffer) as a buffer
  /// appended to `out` and bound after the kernel's other bindings, as the runtime binds it.
  static void placeWords(const SpirvKernel &k, const std::vector<uint32_t> &words, VkDispatch &d,
                         OpBuffers &out) {
    ASSERT_EQ(words.size(), k.paramWords());
    const auto *bytes = reinterpret_cast<const uint8_t *>(words.data());
    if (!k.paramsInBuffer) {
      d.pushConstants.assign(bytes, bytes + 4 * words.size());
      return;
    }
    ASSERT_EQ(k.pushConstantBytes(), 0u);
    ASSERT_EQ(k.numBindings(), k.bindings.size() + 1);
    ASSERT_EQ(d.bindingBuffers.size(), k.bindings.size()) << "the words bind last";
    d.bindingBuffers.push_back(static_cast<uint32_t>(out.bytes.size()));
    out.bytes.emplace_back(bytes, bytes + 4 * words.size());
  }
  /// Takes the words' buffer placeWords appended back off `out`.
  static void dropWords(const SpirvKernel &k, OpBuffers &out) {
    if (k.paramsInBuffer)
      out.bytes.pop_back();
  }

  /// Builds `op` (the integers of `paramMask` read at run time), runs it and the reference on
  /// equal random buffers, and compares.
  /// `tolerance` 0: toleranceOf the kernel.
  void check(const OpCall &op, const std::string &what, uint8_t paramMask = 0, uint32_t seed = 1,
             const SpirvTarget *custom = nullptr, double tolerance = 0) {
    // Kernels are cached by key: the row counts of one shape share a kernel, as in the runtime.
    codegen::KernelSpec spec = codegen::singleOpSpec(op, paramMask);
    SpirvTarget t = custom ? *custom : target();
    const SpirvKernel *k = kernelOf(spec, t, what);
    ASSERT_NE(k, nullptr) << what;
    std::mt19937 rng(seed);
    std::vector<uint64_t> sizes = fittingSizes(op);
    OpBuffers out = makeBuffers(op, sizes, rng);
    placeNormInput(out);
    OpBuffers ref = out;
    int64_t ints[5];
    for (int i = 0; i < 5; ++i)
      ints[i] = static_cast<int64_t>(op.ints[i]);
    VkDispatch d;
    d.words = &k->words;
    d.grid = k->grid(ints);
    std::vector<uint32_t> words;
    for (uint8_t i : k->pushConstantInts)
      words.push_back(static_cast<uint32_t>(op.ints[i]));
    for (uint32_t i = 0; i < k->bindings.size(); ++i)
      d.bindingBuffers.push_back(slotOfOperand(op, uint8_t(i)));
    placeWords(*k, words, d, out);
    absl::Status status = runner_->run(d, out.bytes);
    ASSERT_TRUE(status.ok()) << what << ": " << status;
    dropWords(*k, out);
    runReference(op, ref);
    expectSameResults(op, out, ref, what, tolerance > 0 ? tolerance : toleranceOf(k->words));
  }

  /// The kernel of `spec` on `t`, built once per key: the row counts of one shape share a kernel,
  /// as in the runtime. Null (with a failure) when it does not build.
  const SpirvKernel *kernelOf(const codegen::KernelSpec &spec, const SpirvTarget &t,
                              const std::string &what) {
    std::string key =
        spec.key() + "/" + std::to_string(t.qmatmulRows) + "/" +
        std::to_string(t.qmatmulWorkgroup) + "/" + std::to_string(t.qmatmulBlocksPerStep) +
        (t.qmatmulGenericDecode ? "/generic" : "") + (t.qmatmulSplitBlocks ? "/split" : "") +
        (t.qmatmulIntDot ? "/dot" : "") + (t.qmatmulPrefetch ? "" : "/late") + "/" +
        std::to_string(t.qmatmulUnroll) + "/" + std::to_string(t.qmatmulDotUnroll) + "/g" +
        std::to_string(t.qmatmulGroups) + "/w" + std::to_string(t.qmatmulWorkgroupRows) + "/lw" +
        std::to_string(t.qmatmulLaneWords) + (t.qmatmulBlockWindow ? "" : "/nowindow") +
        (t.paramsInBuffer ? "/params" : "") + "/a" + std::to_string(t.attentionWorkgroup) + "/" +
        std::to_string(t.attentionSplits);
    auto cached = kernels_->find(key);
    if (cached == kernels_->end()) {
      absl::StatusOr<SpirvKernel> built = codegen::buildSpirvKernel(spec, t);
      EXPECT_TRUE(built.ok()) << what << ": " << built.status();
      if (!built.ok())
        return nullptr;
      cached = kernels_->emplace(key, std::move(*built)).first;
    }
    return &cached->second;
  }

  /// normInput_, when set, as the first floats of slot 0 (the rms_norm's x of the tests).
  void placeNormInput(OpBuffers &buffers) const {
    if (normInput_.empty())
      return;
    ASSERT_GE(buffers.bytes[0].size(), 4 * normInput_.size());
    std::memcpy(buffers.bytes[0].data(), normInput_.data(), 4 * normInput_.size());
  }

  /// SEMANTICS.md's bound: 5e-4 for a kernel that quantizes x (integer dot products), else 1e-7.
  static double toleranceOf(const std::vector<uint32_t> &words) {
    return usesIntDot(words) ? kQuantizedActivationTolerance : kF32Tolerance;
  }
  /// True when the module has an OpSDot or OpSUDot instruction.
  static bool usesIntDot(const std::vector<uint32_t> &words) {
    for (size_t i = 5; i < words.size();) {
      uint32_t opcode = words[i] & 0xffff, count = words[i] >> 16;
      if (opcode == 4450 || opcode == 4452)
        return true;
      i += std::max<uint32_t>(count, 1);
    }
    return false;
  }

  /// Runs the fused kernel of `members` (prologue, anchor at `anchor`, epilogue; slot handles)
  /// and the reference of each member in order on equal buffers; slots in `poisoned` start as
  /// poison (the outputs), the others random, and every written range is compared by NMSE.
  /// `paramMasks[m]`: member m's integers read at run time (default none).
  void checkFused(const std::vector<OpCall> &members, size_t anchor,
                  const std::vector<uint32_t> &poisoned, const std::string &what,
                  const std::vector<uint8_t> &paramMasks = {}) {
    codegen::KernelSpec spec;
    for (size_t m = 0; m < members.size(); ++m) {
      codegen::OpShape shape =
          codegen::shapeOf(members[m], m < paramMasks.size() ? paramMasks[m] : 0);
      if (m < anchor)
        spec.prologue.push_back(shape);
      else if (m == anchor)
        spec.anchor = shape;
      else
        spec.epilogue.push_back(shape);
    }
    if (stacked_) {
      spec.stackedProducts = true;
      for (codegen::OpShape *s : {&spec.anchor}) {
        s->staticMask |= 1;
        s->ints[0] = static_cast<int64_t>(members[anchor].ints[0]);
      }
      for (size_t m = anchor + 1; m < members.size(); ++m)
        if (members[m].kind == OpKind::QuantizedMatmul) {
          codegen::OpShape &s = spec.epilogue[m - anchor - 1];
          s.staticMask |= 1;
          s.ints[0] = static_cast<int64_t>(members[m].ints[0]);
        }
      spec.rowsHint = static_cast<uint32_t>(members[anchor].ints[0]);
    }
    spec.earlyInputs = earlyInputs_;
    const SpirvKernel *k = kernelOf(spec, target(), what);
    ASSERT_NE(k, nullptr) << what;
    std::mt19937 rng(7);
    std::vector<uint64_t> sizes;
    for (const OpCall &op : members) {
      std::vector<uint64_t> s = fittingSizes(op);
      sizes.resize(std::max(sizes.size(), s.size()), 0);
      for (size_t i = 0; i < s.size(); ++i)
        sizes[i] = std::max(sizes[i], s[i]);
    }
    OpBuffers out;
    for (size_t i = 0; i < sizes.size(); ++i) {
      bool poison = std::find(poisoned.begin(), poisoned.end(), i) != poisoned.end();
      std::vector<uint8_t> b =
          poison ? poisonBytes(sizes[i]) : floatBytes(randomFloats((sizes[i] + 3) / 4, rng));
      b.resize(sizes[i]);
      out.bytes.push_back(std::move(b));
    }
    for (const OpCall &qm : members) // the anchor's W, and a sibling product's
      if (qm.kind == OpKind::QuantizedMatmul) {
        std::vector<uint8_t> weights = randomWeights(qm.dtype, qm.ints[0], qm.ints[1], rng);
        std::memcpy(out.bytes[slotOfOperand(qm, 0)].data(), weights.data(), weights.size());
      }
    placeNormInput(out);
    OpBuffers ref = out;
    VkDispatch d;
    d.words = &k->words;
    int64_t ints[5];
    for (int i = 0; i < 5; ++i)
      ints[i] = static_cast<int64_t>(members[k->anchorMember].ints[i]);
    d.grid = k->grid(ints);
    std::vector<uint32_t> words;
    for (size_t j = 0; j < k->pushConstantInts.size(); ++j)
      words.push_back(
          static_cast<uint32_t>(members[k->pushConstantMembers[j]].ints[k->pushConstantInts[j]]));
    for (uint32_t i = 0; i < k->bindings.size(); ++i)
      d.bindingBuffers.push_back(
          slotOfOperand(members[k->bindingMembers[i]], k->bindingOperands[i]));
    placeWords(*k, words, d, out);
    absl::Status status = runner_->run(d, out.bytes);
    ASSERT_TRUE(status.ok()) << what << ": " << status;
    dropWords(*k, out);
    for (const OpCall &op : members)
      runReference(op, ref);
    std::vector<std::vector<bool>> written(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i)
      written[i].assign(sizes[i], false);
    for (const OpCall &op : members) {
      // Named: a range-for over *opAccesses(op) would outlive the StatusOr (use after scope).
      absl::StatusOr<AccessList> accesses = opAccesses(op);
      ASSERT_TRUE(accesses.ok()) << what << ": " << accesses.status();
      for (const BufferAccess &a : *accesses) {
        if (!a.write)
          continue;
        uint32_t s = slotOfOperand(op, a.bufferIndex);
        std::vector<float> of = bytesFloats({out.bytes[s].data() + a.offset, a.size});
        std::vector<float> rf = bytesFloats({ref.bytes[s].data() + a.offset, a.size});
        EXPECT_TRUE(nmseWithinMatchingNaN<float>(of, rf, toleranceOf(k->words)))
            << what << ": " << opInfo(op.kind).name << "'s output, slot " << s;
        for (uint64_t b = a.offset; b < a.offset + a.size; ++b)
          written[s][b] = true;
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t b = 0; b < sizes[i]; ++b)
        if (!written[i][b] && out.bytes[i][b] != ref.bytes[i][b]) {
          ADD_FAILURE() << what << ": slot " << i << " byte " << b << " changed";
          break;
        }
  }

  /// The attention kernel over `heads` heads (`group` query heads per K/V head) against the
  /// members run head after head: q = slot 0, K = 1, scores = 2, V = 3, out = 4. Without
  /// `storeScores` (kAttnStoreScores = 0, dead scores) the scores buffer must be left as it was.
  void checkAttention(uint32_t heads, uint32_t group, uint32_t headDim, uint32_t seqLen,
                      const std::string &what, bool storeScores = true) {
    uint32_t kvStride = heads / group * headDim;
    std::vector<OpCall> members;
    for (uint32_t h = 0; h < heads; ++h) {
      uint32_t kv = h / group * headDim;
      members.push_back(
          ops::attnScore(slot(0), slot(1), slot(2), headDim, seqLen, h * headDim, kv, kvStride));
      members.push_back(ops::softmax(slot(2), slot(2), seqLen));
      members.push_back(
          ops::attnValue(slot(2), slot(3), slot(4), headDim, seqLen, kv, kvStride, h * headDim));
    }
    codegen::KernelSpec spec;
    spec.anchor = codegen::shapeOf(members[0], 0);
    spec.epilogue = {codegen::shapeOf(members[1], 0), codegen::shapeOf(members[2], 0)};
    spec.attentionOverHeads = true;
    absl::StatusOr<SpirvKernel> k = codegen::buildSpirvKernel(spec, target());
    ASSERT_TRUE(k.ok()) << what << ": " << k.status();
    ASSERT_TRUE(k->perHead);
    const uint32_t splits = k->attentionSplits;
    if (attentionSplits_ > 0)
      ASSERT_EQ(splits, attentionSplits_) << what;
    else
      ASSERT_GT(splits, 1u) << what << ": attention is split by default";
    std::mt19937 rng(11);
    std::vector<uint64_t> sizes(5, 0);
    for (const OpCall &op : members) {
      std::vector<uint64_t> s = fittingSizes(op);
      for (size_t i = 0; i < s.size() && i < sizes.size(); ++i)
        sizes[i] = std::max(sizes[i], s[i]);
    }
    OpBuffers out;
    for (size_t i = 0; i < sizes.size(); ++i) {
      bool poison = i == 2 || i == 4;
      std::vector<uint8_t> b =
          poison ? poisonBytes(sizes[i]) : floatBytes(randomFloats((sizes[i] + 3) / 4, rng));
      b.resize(sizes[i]);
      out.bytes.push_back(std::move(b));
    }
    OpBuffers ref = out;
    VkDispatch d;
    d.words = &k->words;
    d.grid = {heads * splits, 1, 1};
    std::vector<uint32_t> words;
    for (size_t j = 0; j < k->pushConstantInts.size(); ++j)
      words.push_back(
          static_cast<uint32_t>(members[k->pushConstantMembers[j]].ints[k->pushConstantInts[j]]));
    ASSERT_EQ(k->extraPushWords, uint32_t(codegen::kAttnExtraWords));
    for (uint32_t w : {heads, group, headDim, headDim, headDim, headDim, uint32_t(storeScores)})
      words.push_back(w);
    for (uint32_t i = 0; i < k->bindings.size(); ++i) {
      if (k->bindingMembers[i] == codegen::kScratchMember) {
        // Split attention's scratch, zero as the runtime gives it.
        ASSERT_GT(splits, 1u);
        ASSERT_EQ(i + 1, k->bindings.size()) << "scratch is the last storage binding";
        d.bindingBuffers.push_back(out.bytes.size());
        out.bytes.emplace_back(4ull * heads * k->scratchWordsPerHead, 0);
        continue;
      }
      d.bindingBuffers.push_back(
          slotOfOperand(members[k->bindingMembers[i]], k->bindingOperands[i]));
    }
    placeWords(*k, words, d, out);
    // Twice with the same scratch: the kernel must leave its counters at zero for the next run.
    for (int run = 0; run < (splits > 1 ? 2 : 1); ++run) {
      absl::Status status = runner_->run(d, out.bytes);
      ASSERT_TRUE(status.ok()) << what << ": " << status;
    }
    dropWords(*k, out);
    if (splits > 1) {
      std::vector<uint32_t> counters(heads);
      std::memcpy(counters.data(), out.bytes.back().data(), 4 * heads);
      for (uint32_t h = 0; h < heads; ++h)
        EXPECT_EQ(counters[h], 0u) << what << ": head " << h << "'s counter after the run";
    }
    const std::vector<uint8_t> scoresBefore = ref.bytes[2];
    for (const OpCall &op : members)
      runReference(op, ref);
    if (!storeScores) {
      EXPECT_TRUE(out.bytes[2] == scoresBefore) << what << ": dead scores were written";
      ref.bytes[2] = scoresBefore;
    }
    for (uint32_t s : {2u, 4u}) {
      if (s == 2 && !storeScores)
        continue;
      uint64_t bytes = s == 2 ? 4ull * seqLen : 4ull * heads * headDim;
      std::vector<float> of = bytesFloats({out.bytes[s].data(), bytes});
      std::vector<float> rf = bytesFloats({ref.bytes[s].data(), bytes});
      EXPECT_TRUE(nmseWithin<float>(of, rf, kF32Tolerance))
          << what << ": slot " << s << (s == 2 ? " (the last head's weights)" : " (out)");
      EXPECT_TRUE(std::equal(out.bytes[s].begin() + bytes, out.bytes[s].end(),
                             ref.bytes[s].begin() + bytes))
          << what << ": slot " << s << " changed past the written range";
    }
  }

  static VkRunner *runner_;
  static std::string *skipReason_;
  /// target()'s SpirvTarget::qmatmulSplitBlocks (the default, true, unless a test changes it).
  bool split_ = true;
  /// target()'s SpirvTarget::qmatmulIntDot (int8 x where the device has integer dot products).
  bool intDot_ = true;
  /// target()'s SpirvTarget::attentionWorkgroup and attentionSplits.
  uint32_t attentionWorkgroup_ = 0;
  uint32_t attentionSplits_ = 0;
  /// target()'s SpirvTarget::qmatmulGroups (0: one workgroup per tile of rows).
  uint32_t groups_ = 0;
  /// target()'s SpirvTarget::qmatmulWorkgroupRows (0: off).
  uint32_t workgroupRows_ = 0;
  /// target()'s SpirvTarget::qmatmulLaneWords (0: the built-in choice).
  uint32_t laneWords_ = 0;
  /// target()'s SpirvTarget::paramsInBuffer.
  bool paramsInBuffer_ = false;
  /// checkFused builds the members as stacked products (KernelSpec::stackedProducts, every
  /// product's n_rows static).
  bool stacked_ = false;
  /// When set, check() and checkFused() start slot 0 (the norm's x) with these floats instead of
  /// random ones (tests/support/RangeRows.h).
  std::vector<float> normInput_;
  /// checkFused's KernelSpec::earlyInputs (the runtime's bits of members whose second input no
  /// earlier member writes).
  uint32_t earlyInputs_ = 0;
  static std::map<std::string, SpirvKernel> *kernels_;
};

} // namespace sinter::test

#endif // SINTER_TESTS_UNIT_SPIRV_SPIRVKERNELFIXTURE_H
