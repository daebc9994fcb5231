// LaunchGroups.h - how the Vulkan runtime launches the member ops of one fused kernel.
//
// The fusion passes say which ops belong together (a Kernel of a KernelProgram); the SPIR-V code
// generator builds a few shapes of fused kernel (KernelSpec: an rms_norm prologue and an
// element-wise epilogue on a quantized_matmul, attention over the heads of a layer). This file
// matches a Kernel's members against those shapes and checks, on the slots and the integers,
// every condition the generated code relies on; whatever does not match runs as single-op
// launches. A horizontal group (Q, K, V after one rms_norm) becomes one launch per projection,
// each recomputing the norm, only the first storing it: launches on distinct slots need no
// barrier between them, so they overlap on the device. The rope and KV-cache copies after such a
// group become the projections' epilogues (LaunchOptions::cacheTails), and the projections with
// those tails one stacked launch (LaunchOptions::stackedProducts: the device does not overlap
// the separate launches, each paid its whole fixed cost). Gate and up, whose
// SwiGLU reads both, become one launch that computes the same rows of both
// (LaunchOptions::siblingProducts).
//
// Plain C++ (no Vulkan, no MLIR): the matching is unit-tested on its own.
#ifndef SINTER_RUNTIME_VULKAN_LAUNCHGROUPS_H
#define SINTER_RUNTIME_VULKAN_LAUNCHGROUPS_H

#include <array>
#include <cstdint>
#include <vector>

#include "codegen/KernelSpec.h"
#include "support/KernelProgram.h"

namespace sinter::runtime::vulkan {

/// One launch of a kernel's members.
struct Launch {
  enum class Kind : uint8_t {
    Single,    ///< one member op (or upload / copy) on its own
    Chain,     ///< [rms_norm] quantized_matmul [silu | add | element_mul ...]
    Attention, ///< attn_score, softmax, attn_value for every head of a layer
  };
  Kind kind = Kind::Single;
  /// The members in KernelSpec order (prologue, anchor, epilogue). Attention: head 0's three.
  /// An add or element_mul of an epilogue has its operands swapped when the chained value was
  /// its second (both commute exactly), so its first input is always the previous output.
  std::vector<KernelMember> members;
  /// Chain and Attention: what to build (members' shapes, unstoredOutputs, attentionOverHeads).
  codegen::KernelSpec spec;
  /// Attention: every head's members in order (score, softmax, value per head) for the run-time
  /// check that all heads see the same seq_len, and for running them one by one when not.
  std::vector<KernelMember> headMembers;
  /// Attention: codegen::AttentionWord values (heads, heads per K/V head, the four strides,
  /// and whether to store the scores: 1 here, the plan clears it for dead scores).
  std::array<uint32_t, 7> attentionWords{};
};

/// Index of codegen::kAttnStoreScores in Launch::attentionWords (VulkanBackend.cpp checks that
/// they agree; the runtime does not include the code generator's header).
inline constexpr size_t kAttentionStoreScoresWord = 6;

struct LaunchOptions {
  /// A horizontal group's rope and KV-cache copies become epilogues of its projections: Q's
  /// launch rotates its rows, K's rotates and also stores them into the K cache, V's also stores
  /// into the V cache (no rope, no copy launches). Off: they launch on their own.
  bool cacheTails = true;
  /// Two Q4_0 or Q8_0 products of a norm's group whose epilogue chains from one and takes the
  /// other's output as the second input of its binary members (silu(gate) * up) become one
  /// launch (codegen::hasSiblingProduct): each workgroup computes the same rows of both, so the
  /// epilogue needs no barrier after the other product. Off: a launch per product, the chained
  /// one after the other.
  bool siblingProducts = true;
  /// With cacheTails, the products of a norm's group (Q, K, V of one format and n_cols, fixed
  /// row counts) and their tails become one launch (KernelSpec::stackedProducts): the first
  /// workgroups compute Q's rows, the next K's, then V's, so the group pays one launch's fixed
  /// cost instead of three. Off: a launch per product.
  bool stackedProducts = true;
};

/// The launches of `kernel`, in an order that computes what its members do in sequence.
std::vector<Launch> planLaunches(const Kernel &kernel, const LaunchOptions &options = {});

/// True when a launch has a rope or copy_buffer_offset epilogue (LaunchOptions::cacheTails).
bool hasCacheTail(const Launch &launch);

/// Where the seq_len of an Attention launch's heads (attn_score's and attn_value's, softmax's
/// size) comes from: the plan parameters, each once, and the constant of those that are not
/// parameters. Worked out once per plan, so that a run compares a few words instead of binding
/// every member (a tinyllama-1.1b token has 22 attention launches of 96 members).
struct SeqLenSources {
  std::vector<uint32_t> params;
  bool hasConstant = false;
  uint64_t constant = 0;
  bool constantsDiffer = false; ///< two members' constants differ: never uniform
};
SeqLenSources seqLenSources(absl::Span<const KernelMember> headMembers);

/// True when every source's value this run is the same (seqLenSources).
bool seqLensAgree(const SeqLenSources &sources, absl::Span<const uint64_t> params);

/// For an Attention launch's headMembers: true when every head's seq_len (and softmax size)
/// bound for this run equals head 0's, so the generated kernel computes what the members would.
bool attentionUniform(absl::Span<const KernelMember> headMembers,
                      absl::Span<const uint64_t> params);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_LAUNCHGROUPS_H
