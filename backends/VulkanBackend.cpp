// VulkanBackend.cpp - wires LazyBackend, VulkanBufferStore, FusionCompiler and VulkanCompiler
// into the `vulkan` kind, and adapts the SPIR-V code generator's kernels to the runtime's.
#include "backends/VulkanBackend.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/EagerBackend.h"
#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "runtime/vulkan/LaunchGroups.h"
#include "runtime/vulkan/VulkanBufferStore.h"
#include "sinter/Status.h"
#ifdef SINTER_HAVE_SPIRV_CODEGEN
#include "codegen/spirv/SpirvCompiler.h"
#endif

namespace sinter {

using runtime::vulkan::DeviceCaps;
using runtime::vulkan::VulkanKernel;
using runtime::vulkan::VulkanKernelBuilder;

namespace {
// SINTER_VK_REPLAY=0: every flush records its command buffer, the kernels push their integers.
bool replayDisabledByEnv() {
  const char *env = std::getenv("SINTER_VK_REPLAY");
  return env && std::string(env) == "0";
}

// SINTER_VK_QMATMUL="rows=4,wg=256,...": the quantized_matmul schedule overrides (for tuning,
// docs/ENVIRONMENT.md), as key and value pairs in order; none when the variable is unset.
std::vector<std::pair<std::string, std::string>> qmatmulOverrides() {
  std::vector<std::pair<std::string, std::string>> items;
  if (const char *env = std::getenv("SINTER_VK_QMATMUL"))
    for (absl::string_view item : absl::StrSplit(env, ',', absl::SkipEmpty()))
      items.push_back(absl::StrSplit(item, absl::MaxSplits('=', 1)));
  return items;
}

// SINTER_VK_QMATMUL's `pairs=0` (gate and up launch one after the other instead of as one
// kernel with a sibling product) and `stack=0` (Q, K and V launch one by one instead of as one
// stacked kernel), for side-by-side timing.
bool turnedOffByEnv(absl::string_view name) {
  for (const auto &[key, value] : qmatmulOverrides())
    if (key == name && value == "0")
      return true;
  return false;
}

// The SINTER_VK_QMATMUL items that take a number (spirvCodegenBuilder reads them).
constexpr const char *kNumericOverrides[] = {"rows",      "wg",        "step",   "unroll",
                                             "dotunroll", "words",     "groups", "wgrows",
                                             "attnwg",    "attnsplit", "cus"};

// A numeric item whose value is not a non-negative 32-bit integer is an error naming the
// variable, not a silently kept default.
absl::Status checkQmatmulOverrides() {
  for (const auto &[key, value] : qmatmulOverrides()) {
    uint32_t v = 0;
    for (const char *numeric : kNumericOverrides)
      if (key == numeric &&
          (value.empty() || !absl::ascii_isdigit(value[0]) || !absl::SimpleAtoi(value, &v)))
        return absl::InvalidArgumentError(absl::StrCat("SINTER_VK_QMATMUL: ", key, "='", value,
                                                       "' is not a non-negative integer"));
  }
  return absl::OkStatus();
}
} // namespace

bool haveSpirvCodegen() {
#ifdef SINTER_HAVE_SPIRV_CODEGEN
  return true;
#else
  return false;
#endif
}

VulkanKernelBuilder spirvCodegenBuilder(const DeviceCaps &caps, bool paramsInBuffer) {
#ifdef SINTER_HAVE_SPIRV_CODEGEN
  codegen::SpirvTarget target;
  target.subgroupSize = caps.subgroupSize;
  target.storage8 = caps.storageBuffer8BitAccess;
  target.storage16 = caps.storageBuffer16BitAccess;
  target.float16 = caps.shaderFloat16;
  target.intDot = caps.integerDotProduct;
  target.denormPreserve = caps.shaderDenormPreserveFloat32;
  target.maxSharedMemoryBytes = caps.maxComputeSharedMemorySize;
  // SINTER_PRECISE=1 keeps activations in f32, as on the CPU.
  if (const char *precise = std::getenv("SINTER_PRECISE"); precise && std::string(precise) == "1")
    target.qmatmulIntDot = false;
  target.maxWorkgroupInvocations = caps.maxComputeWorkGroupInvocations;
  target.computeUnits = caps.smCount;
  // The integers in a parameter buffer, so plans replay their command buffers.
  target.paramsInBuffer = paramsInBuffer;
  for (const std::pair<std::string, std::string> &kv : qmatmulOverrides()) {
    if (kv.first == "decode" && kv.second == "generic")
      target.qmatmulGenericDecode = true;
    if (kv.first == "split")
      target.qmatmulSplitBlocks = kv.second == "1";
    if (kv.first == "dot")
      target.qmatmulIntDot = kv.second != "0";
    if (kv.first == "prefetch") // 1: every product; 0: none (default: one-wave grids)
      target.qmatmulPrefetch = target.qmatmulPrefetchSmallGrids = kv.second != "0";
    if (kv.first == "window")
      target.qmatmulBlockWindow = kv.second != "0";
    if (kv.first == "early")
      target.qmatmulEarlyInputs = kv.second != "0";
    if (kv.first == "nonwritable")
      target.readOnlyBindings = kv.second != "0";
    uint32_t v = 0;
    if (!absl::SimpleAtoi(kv.second, &v))
      continue;
    if (kv.first == "rows")
      target.qmatmulRows = v;
    else if (kv.first == "wg")
      target.qmatmulWorkgroup = v;
    else if (kv.first == "step")
      target.qmatmulBlocksPerStep = v;
    else if (kv.first == "unroll")
      target.qmatmulUnroll = v;
    else if (kv.first == "dotunroll")
      target.qmatmulDotUnroll = v;
    else if (kv.first == "words")
      target.qmatmulLaneWords = v;
    else if (kv.first == "groups")
      target.qmatmulGroups = v;
    else if (kv.first == "wgrows")
      target.qmatmulWorkgroupRows = v;
    else if (kv.first == "attnwg")
      target.attentionWorkgroup = v;
    else if (kv.first == "attnsplit")
      target.attentionSplits = v;
    else if (kv.first == "cus")
      target.computeUnits = v;
  }
  target.maxStorageBuffers = caps.maxPerStageDescriptorStorageBuffers;
  return [target](const codegen::KernelSpec &spec) -> absl::StatusOr<VulkanKernel> {
    SINTER_ASSIGN_OR_RETURN(codegen::SpirvKernel k, codegen::buildSpirvKernel(spec, target));
    VulkanKernel out;
    out.name = k.name;
    out.binary.spirv = k.words;
    out.binary.entryPoint = k.entryPoint;
    out.binary.name = k.name;
    out.binary.numBuffers = k.numBindings();
    out.binary.pushConstantBytes = k.pushConstantBytes();
    out.paramWords = k.paramsInBuffer ? k.paramWords() : 0;
    out.binary.localSize = k.localSize;
    // The kernels assume subgroups of exactly target.subgroupSize lanes, all of them full.
    out.binary.requireFullSubgroups = true;
    out.binary.requiredSubgroupSize = target.subgroupSize;
    out.pushConstantInts = k.pushConstantInts;
    out.pushConstantMembers = k.pushConstantMembers;
    out.bindingMembers = k.bindingMembers;
    out.bindingOperands = k.bindingOperands;
    out.extraPushWords = k.extraPushWords;
    out.perHead = k.perHead;
    static_assert(codegen::kScratchMember == runtime::vulkan::kScratchBindingMember);
    static_assert(codegen::kAttnStoreScores == runtime::vulkan::kAttentionStoreScoresWord);
    static_assert(codegen::kAttnExtraWords ==
                  std::tuple_size_v<decltype(runtime::vulkan::Launch::attentionWords)>);
    out.attentionSplits = k.attentionSplits;
    out.scratchWordsPerHead = k.scratchWordsPerHead;
    out.grid = [k](const int64_t *ints) { return k.grid(ints); };
    out.gridInts = k.fixedGroups ? 0 : codegen::spirvUnitsInts(k.kind);
    return out;
  };
#else
  (void)caps;
  (void)paramsInBuffer;
  return [](const codegen::KernelSpec &spec) -> absl::StatusOr<VulkanKernel> {
    return absl::UnimplementedError(
        absl::StrCat("kernel ", spec.name(), ": the SPIR-V code generator is not in this build"));
  };
#endif
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> createVulkanBackend(const BackendOptions &options,
                                                                    VulkanBackendOptions vulkan) {
  if (!vulkan.builder && !haveSpirvCodegen())
    return absl::UnimplementedError(
        "backend 'vulkan' is not built yet: the SPIR-V code generator is not in this build");
  SINTER_RETURN_IF_ERROR(checkQmatmulOverrides());
  std::shared_ptr<runtime::vulkan::VulkanDevice> device = vulkan.device;
  if (!device) {
    SINTER_ASSIGN_OR_RETURN(std::unique_ptr<runtime::vulkan::VulkanDevice> made,
                            runtime::vulkan::VulkanDevice::create(vulkan.deviceOptions));
    device = std::move(made);
  }
  runtime::vulkan::VulkanCompilerOptions compilerOptions;
  compilerOptions.logFallbacks = vulkan.logFallbacks;
  // The counters go to the caller's sink, else to one of our own: LazyStats::submissions reads it.
  std::shared_ptr<runtime::vulkan::VulkanStatsSink> sink =
      vulkan.stats ? vulkan.stats : std::make_shared<runtime::vulkan::VulkanStatsSink>();
  compilerOptions.stats = sink;
  compilerOptions.replay = vulkan.replay && !replayDisabledByEnv();
  compilerOptions.siblingProducts = !turnedOffByEnv("pairs");
  compilerOptions.stackedProducts = !turnedOffByEnv("stack");
  compilerOptions.elideDeadScores = !turnedOffByEnv("deadscores");
  compilerOptions.kernelCacheCapacity = vulkan.kernelCacheCapacity;
  const char *stats = std::getenv("SINTER_STATS");
  compilerOptions.printKernelTimes = stats && *stats && std::strcmp(stats, "0") != 0;
  VulkanKernelBuilder builder = vulkan.builder
                                    ? std::move(vulkan.builder)
                                    : spirvCodegenBuilder(device->caps(), compilerOptions.replay);
  auto compiler = std::make_shared<runtime::vulkan::VulkanCompiler>(device, std::move(builder),
                                                                    compilerOptions);

  runtime::LazyBackendOptions lazy;
  lazy.deviceSubmissions = [sink] { return sink->get().submissions; };
  lazy.overlapCalls = vulkan.overlapCalls;
  lazy.overlapGrowth = vulkan.overlapGrowth;
  auto store =
      std::make_unique<runtime::vulkan::VulkanBufferStore>(device, options.memoryLimitBytes);
  lazy.store = std::move(store);
  if (options.fusion && !options.eager) {
    lazy.name = "sinter-vulkan";
    lazy.compiler = std::make_unique<passes::FusionCompiler>(
        passes::FusionOptions{options.disabledFusions},
        [compiler](KernelProgram program) { return compiler->compileProgram(program); },
        "fusion+vulkan");
    return std::unique_ptr<ComputeBackend>(new runtime::LazyBackend(std::move(lazy)));
  }
  // Without fusion the lazy backend owns the compiler through a forwarding PlanCompiler.
  class Unfused : public PlanCompiler {
  public:
    explicit Unfused(std::shared_ptr<runtime::vulkan::VulkanCompiler> c) : c_(std::move(c)) {}
    std::string name() const override { return c_->name(); }
    absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                  const std::vector<IntSlot> &params) override {
      return c_->compile(trace, params);
    }

  private:
    std::shared_ptr<runtime::vulkan::VulkanCompiler> c_;
  };
  lazy.compiler = std::make_unique<Unfused>(compiler);
  if (options.eager) {
    // One call per flush, each waited for: the per-op baseline of the benchmarks.
    lazy.name = "sinter-vulkan-eager";
    return std::unique_ptr<ComputeBackend>(
        new EagerBackend(std::make_unique<runtime::LazyBackend>(std::move(lazy))));
  }
  lazy.name = "sinter-vulkan-unfused";
  return std::unique_ptr<ComputeBackend>(new runtime::LazyBackend(std::move(lazy)));
}

} // namespace sinter
