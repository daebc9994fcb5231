// SpirvKernelTest.cpp - runs every generated SPIR-V kernel on the machine's Vulkan device
// (lavapipe in CI) against executeReference on random inputs with poisoned outputs, under the
// Khronos validation layer: any warning or error it reports fails the test.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "codegen/spirv/SpirvCompiler.h"
#include "tests/unit/codegen/KernelHarness.h"
#include "tests/unit/spirv/VkRunner.h"

namespace sinter::test {
namespace {

using codegen::SpirvKernel;
using codegen::SpirvTarget;

BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

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
    std::string key =
        spec.key() + "/" + std::to_string(t.qmatmulRows) + "/" +
        std::to_string(t.qmatmulWorkgroup) + "/" + std::to_string(t.qmatmulBlocksPerStep) +
        (t.qmatmulGenericDecode ? "/generic" : "") + (t.qmatmulSplitBlocks ? "/split" : "") +
        (t.qmatmulIntDot ? "/dot" : "") + (t.qmatmulPrefetch ? "" : "/late") + "/" +
        std::to_string(t.qmatmulUnroll) + "/" + std::to_string(t.qmatmulDotUnroll) + "/g" +
        std::to_string(t.qmatmulGroups) + "/w" + std::to_string(t.qmatmulWorkgroupRows) + "/lw" +
        std::to_string(t.qmatmulLaneWords) + (t.qmatmulBlockWindow ? "" : "/nowindow") +
        (t.paramsInBuffer ? "/params" : "");
    auto cached = kernels_->find(key);
    if (cached == kernels_->end()) {
      absl::StatusOr<SpirvKernel> built = codegen::buildSpirvKernel(spec, t);
      ASSERT_TRUE(built.ok()) << what << ": " << built.status();
      cached = kernels_->emplace(key, std::move(*built)).first;
    }
    const SpirvKernel *k = &cached->second;
    std::mt19937 rng(seed);
    std::vector<uint64_t> sizes = fittingSizes(op);
    OpBuffers out = makeBuffers(op, sizes, rng);
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
    absl::StatusOr<SpirvKernel> k = codegen::buildSpirvKernel(spec, target());
    ASSERT_TRUE(k.ok()) << what << ": " << k.status();
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
        EXPECT_TRUE(nmseWithin<float>(of, rf, toleranceOf(k->words)))
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
  /// checkFused's KernelSpec::earlyInputs (the runtime's bits of members whose second input no
  /// earlier member writes).
  uint32_t earlyInputs_ = 0;
  static std::map<std::string, SpirvKernel> *kernels_;
};
VkRunner *SpirvKernelTest::runner_ = nullptr;
std::string *SpirvKernelTest::skipReason_ = nullptr;
std::map<std::string, SpirvKernel> *SpirvKernelTest::kernels_ = nullptr;

std::string str(uint64_t v) { return std::to_string(v); }

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
