// VulkanCompiler.cpp - KernelProgram -> a plan's steps: a pipeline per KernelSpec key (built
// once by the injected builder while it stays in the LRU; the steps hold their kernels),
// launches planned by LaunchGroups, fused launches that cannot be built planned again without
// their cache tails or run as their members (logged), and each step's slot accesses for the
// barriers. VulkanPlan.cpp runs the steps.
#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/FaultInjection.h"
#include "runtime/vulkan/LaunchGroups.h"
#include "runtime/vulkan/PlanSteps.h"
#include "runtime/vulkan/VulkanPlan.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {
namespace {

// The slots a fused launch touches: every member's, except the output of a member the kernel
// does not store, and reads of what an earlier member produced (the kernel passes those values
// on in registers: the products after an rms_norm prologue read the norm's input, not its
// output). False when they are more than a step can track.
bool launchAccesses(const Launch &l, StepAccesses *out) {
  *out = StepAccesses{};
  std::vector<uint32_t> produced;
  for (size_t m = 0; m < l.members.size(); ++m) {
    StepAccesses one = accessesOf(l.members[m].entry);
    bool unstored = (l.spec.unstoredOutputs >> m) & 1;
    for (int i = 0; i < one.count; ++i) {
      bool write = one.writes(i) && !unstored;
      bool read = one.reads(i) &&
                  std::find(produced.begin(), produced.end(), one.slots[i]) == produced.end();
      if ((read || write) && !out->add(one.slots[i], read, write))
        return false;
    }
    for (int i = 0; i < one.count; ++i)
      if (one.writes(i))
        produced.push_back(one.slots[i]);
  }
  return true;
}

} // namespace

VulkanCompiler::VulkanCompiler(std::shared_ptr<VulkanDevice> device, VulkanKernelBuilder builder,
                               VulkanCompilerOptions options)
    : device_(std::move(device)), builder_(std::move(builder)), options_(options),
      kernels_(options_.kernelCacheCapacity),
      shared_(options_.stats ? options_.stats : std::make_shared<Shared>()) {}

VulkanCompiler::~VulkanCompiler() = default;

absl::StatusOr<std::unique_ptr<Plan>> VulkanCompiler::compile(const Trace &trace,
                                                              const std::vector<IntSlot> &params) {
  return compileProgram(unfusedProgram(trace, params));
}

std::shared_ptr<const VulkanCompiler::Built>
VulkanCompiler::kernelFor(const codegen::KernelSpec &spec) {
  std::string key = spec.key();
  if (const std::shared_ptr<const Built> *found = kernels_.find(key)) {
    absl::MutexLock lock(&shared_->mu);
    ++shared_->stats.kernelHits;
    return *found;
  }
  // Counted alive until the last holder (this cache or a plan) lets go.
  ++shared_->liveKernels;
  std::shared_ptr<Built> built(new Built, [shared = shared_](Built *b) {
    delete b;
    --shared->liveKernels;
  });
  // The test-only compile fault applies to fused kernels, the ones with a fallback (their
  // members); a single-op kernel that cannot be built fails the compilation instead.
  bool fused = !spec.prologue.empty() || !spec.epilogue.empty() || spec.attentionOverHeads;
  absl::StatusOr<VulkanKernel> kernel = fused && fault::fires(fault::Site::KernelCompile)
                                            ? absl::InternalError("injected kernel-compile fault")
                                        : builder_
                                            ? builder_(spec)
                                            : absl::UnimplementedError("no SPIR-V kernel builder");
  if (kernel.ok()) {
    built->kernel = std::move(kernel).value();
    absl::StatusOr<std::shared_ptr<const Pipeline>> p =
        device_->pipelines().get(built->kernel.binary);
    if (p.ok())
      built->pipeline = std::move(p).value();
    else
      built->status = p.status();
  } else {
    built->status = kernel.status();
  }
  // May drop the least recently used kernel (destroyed here when no plan holds it).
  kernels_.insert(key, built);
  absl::MutexLock lock(&shared_->mu);
  shared_->stats.kernelsBuilt += built->status.ok();
  shared_->stats.cachedKernels = kernels_.size();
  shared_->stats.kernelEvictions = kernels_.evictions();
  return built;
}

absl::StatusOr<std::unique_ptr<Plan>> VulkanCompiler::compileProgram(const KernelProgram &program) {
  std::vector<Step> steps;
  std::string description;
  size_t numSlots = 0;
  auto addSlots = [&](const Step &s) {
    for (int i = 0; i < s.access.count; ++i)
      numSlots = std::max<size_t>(numSlots, s.access.slots[i] + 1);
  };
  // The single-op kernel of one member (an op with none fails the compilation).
  auto singleKernel = [&](const KernelMember &member, size_t k,
                          const Kernel &kernel) -> absl::StatusOr<std::shared_ptr<const Built>> {
    codegen::KernelSpec spec = codegen::singleOpSpec(member.entry.op, paramMaskOf(member));
    // A product's row count, where it is not a parameter: schedules that depend on the grid's
    // size (SpirvTarget::computeUnits) need it.
    if (member.entry.op.kind == OpKind::QuantizedMatmul && member.paramOf[0] < 0 &&
        member.entry.op.ints[0] <= UINT32_MAX)
      spec.rowsHint = static_cast<uint32_t>(member.entry.op.ints[0]);
    std::shared_ptr<const Built> built = kernelFor(spec);
    if (!built->status.ok())
      return absl::Status(
          built->status.code() == absl::StatusCode::kUnimplemented ? built->status.code()
                                                                   : absl::StatusCode::kInternal,
          absl::StrCat("vulkan: no kernel for ", describeOp(member.entry.op), " (", spec.name(),
                       ", kernel #", k, " '", kernel.name, "'): ", built->status.message()));
    return built;
  };
  // Ops no kernel can be built for run on the host, in their place between submissions: slow,
  // but every accepted call computes. Said once per op kind in the log.
  auto hostStep = [&](std::vector<KernelMember> members, size_t k,
                      const absl::Status &why) -> Step {
    Step s;
    s.kind = Step::Kind::Host;
    s.member = members[0];
    s.kernelIndex = static_cast<uint32_t>(k);
    for (const KernelMember &m : members) {
      StepAccesses one = accessesOf(m.entry);
      for (int i = 0; i < one.count; ++i)
        (void)s.access.add(one.slots[i], one.reads(i), one.writes(i));
    }
    s.members = std::move(members);
    const char *op = opInfo(s.member.entry.op.kind).name;
    if (options_.logFallbacks && loggedFallbacks_.emplace(absl::StrCat("host/", op), true).second)
      std::fprintf(stderr, "sinter: %s; %s runs on the host\n", std::string(why.message()).c_str(),
                   op);
    {
      absl::MutexLock lock(&shared_->mu);
      ++shared_->stats.hostSteps;
    }
    return s;
  };
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel &kernel = program.kernels[k];
    std::vector<Launch> launches;
    std::vector<std::shared_ptr<const Built>> fusedBuilt;
    std::vector<StepAccesses> fusedAccess;
    // A fused launch the generator cannot build: the kernel is planned again without stacked
    // products when it had them, then without rope and cache-copy epilogues and without sibling
    // products when it had them, else it goes back to its members.
    for (int attempt = 0; attempt < 3 && kernel.ops.size() > 1; ++attempt) {
      LaunchOptions launchOptions;
      launchOptions.stackedProducts = attempt == 0 && options_.stackedProducts;
      launchOptions.cacheTails = attempt < 2;
      launchOptions.siblingProducts = attempt < 2 && options_.siblingProducts;
      launches = planLaunches(kernel, launchOptions);
      bool stacked = std::any_of(launches.begin(), launches.end(),
                                 [](const Launch &l) { return l.spec.stackedProducts; });
      bool tails = std::any_of(launches.begin(), launches.end(), hasCacheTail);
      bool siblings = std::any_of(launches.begin(), launches.end(), [](const Launch &l) {
        return l.kind == Launch::Kind::Chain && codegen::hasSiblingProduct(l.spec);
      });
      fusedBuilt.assign(launches.size(), nullptr);
      fusedAccess.assign(launches.size(), StepAccesses{});
      std::string why;
      size_t failed = 0;
      bool compiled = true;
      for (size_t l = 0; l < launches.size() && why.empty(); ++l) {
        if (launches[l].kind == Launch::Kind::Single)
          continue;
        std::shared_ptr<const Built> built = kernelFor(launches[l].spec);
        if (!built->status.ok())
          why = std::string(built->status.message());
        else if (!launchAccesses(launches[l], &fusedAccess[l]))
          why = "it touches more buffers than a step tracks";
        compiled = built->status.ok();
        if (why.empty())
          fusedBuilt[l] = std::move(built);
        failed = l;
      }
      if (why.empty())
        break;
      std::string next =
          stacked ? "it is planned again without stacked products"
          : tails || siblings
              ? "it is planned again without epilogue products, rope or cache copies"
              : absl::StrCat("its ", kernel.ops.size(), " member ops run as single-op kernels");
      const char *tag = stacked ? "/stacked" : tails || siblings ? "/tails" : "";
      if (options_.logFallbacks && loggedFallbacks_.emplace(kernel.name + tag, true).second)
        std::fprintf(stderr, "sinter: vulkan: fused kernel '%s' %s (kernel %s: %s); %s\n",
                     kernel.name.c_str(), compiled ? "cannot be launched" : "failed to compile",
                     launches[failed].spec.name().c_str(), why.c_str(), next.c_str());
      {
        absl::MutexLock lock(&shared_->mu);
        ++shared_->stats.fusedFallbacks;
      }
      launches.clear();
      if (!stacked && !tails && !siblings)
        break;
      if (!stacked && attempt == 0)
        ++attempt; // the plan without stacked products is the one that just failed
    }
    if (launches.empty())
      for (const KernelMember &member : kernel.ops) {
        Launch one;
        one.members.push_back(member);
        launches.push_back(std::move(one));
      }
    for (size_t l = 0; l < launches.size(); ++l) {
      const Launch &launch = launches[l];
      if (launch.kind != Launch::Kind::Single) {
        Step s;
        s.kind = Step::Kind::Dispatch;
        s.anchor = static_cast<uint8_t>(launch.spec.prologue.size());
        s.member = launch.members[s.anchor];
        s.members = launch.members;
        s.kernelIndex = static_cast<uint32_t>(k);
        s.built = fusedBuilt[l];
        s.access = fusedAccess[l];
        s.indirect =
            !s.built->kernel.perHead && (paramMaskOf(s.member) & s.built->kernel.gridInts) != 0;
        if (launch.kind == Launch::Kind::Attention) {
          auto heads = std::make_shared<HeadFallback>();
          heads->members = launch.headMembers;
          heads->seqLens = seqLenSources(launch.headMembers);
          heads->words = launch.attentionWords;
          absl::Status missing;
          for (const KernelMember &m : launch.headMembers) {
            absl::StatusOr<std::shared_ptr<const Built>> b = singleKernel(m, k, kernel);
            if (!b.ok()) {
              missing = b.status();
              break;
            }
            heads->built.push_back(*std::move(b));
            heads->access.push_back(accessesOf(m.entry));
          }
          if (!missing.ok()) {
            // Without every head's kernel the launch has no fallback for heads that disagree.
            Step host = hostStep(launch.headMembers, k, missing);
            addSlots(host);
            absl::StrAppend(&description, "kernel ", k, " ", kernel.name, ": host (",
                            launch.headMembers.size(), " ops): ", describeOp(s.member.entry.op),
                            "\n");
            steps.push_back(std::move(host));
            continue;
          }
          s.heads = std::move(heads);
        }
        addSlots(s);
        absl::StrAppend(&description, "kernel ", k, " ", kernel.name, ": spirv ",
                        s.built->kernel.name, " (",
                        launch.kind == Launch::Kind::Attention
                            ? absl::StrCat(launch.attentionWords[0], " heads")
                            : absl::StrCat(launch.members.size(), " ops"),
                        "): ", describeOp(s.member.entry.op), "\n");
        steps.push_back(std::move(s));
        continue;
      }
      const KernelMember &member = launch.members[0];
      Step s;
      s.member = member;
      s.kernelIndex = static_cast<uint32_t>(k);
      s.access = accessesOf(member.entry);
      addSlots(s);
      const TraceEntry &e = member.entry;
      if (e.kind == TraceEntry::Kind::Upload) {
        s.kind = Step::Kind::Upload;
        absl::StrAppend(&description, "host copy ", k, ": slot ", e.uploadSlot, " ", e.uploadBytes,
                        " bytes\n");
        steps.push_back(std::move(s));
        continue;
      }
      if (e.op.kind == OpKind::CopyBuffer || e.op.kind == OpKind::CopyBufferOffset) {
        // A copy whose offsets or size are parameters (the embedding row of the token) would
        // change the commands every run: with replay on, it runs as the generated copy kernel,
        // its integers in the parameter buffer (vkCmdCopyBuffer when there is none).
        if (options_.replay && paramMaskOf(member) != 0) {
          std::shared_ptr<const Built> copy =
              kernelFor(codegen::singleOpSpec(e.op, paramMaskOf(member)));
          if (copy->status.ok() && copy->kernel.paramWords > 0) {
            s.built = std::move(copy);
            s.members = {member};
            absl::StrAppend(&description, "kernel ", k, " ", kernel.name, ": spirv ",
                            s.built->kernel.name, ": ", describeOp(e.op), "\n");
            steps.push_back(std::move(s));
            continue;
          }
        }
        s.kind = Step::Kind::Copy;
        absl::StrAppend(&description, "kernel ", k, " ", kernel.name,
                        ": vkCmdCopyBuffer: ", describeOp(e.op), "\n");
        steps.push_back(std::move(s));
        continue;
      }
      absl::StatusOr<std::shared_ptr<const Built>> single = singleKernel(member, k, kernel);
      if (!single.ok()) {
        Step host = hostStep({member}, k, single.status());
        addSlots(host);
        absl::StrAppend(&description, "kernel ", k, " ", kernel.name, ": host: ", describeOp(e.op),
                        "\n");
        steps.push_back(std::move(host));
        continue;
      }
      s.built = *std::move(single);
      s.members = {member};
      s.indirect = (paramMaskOf(member) & s.built->kernel.gridInts) != 0;
      absl::StrAppend(&description, "kernel ", k, " ", kernel.name, ": spirv ",
                      s.built->kernel.name, ": ", describeOp(e.op), "\n");
      steps.push_back(std::move(s));
    }
  }
  {
    absl::MutexLock lock(&shared_->mu);
    ++shared_->stats.plans;
  }
  return makeVulkanPlan(device_, shared_, std::move(steps), program.numLaunches(), numSlots,
                        std::move(description), options_.printKernelTimes,
                        options_.failOnValidationMessages, options_.replay,
                        options_.elideDeadScores);
}

VulkanCompilerStats VulkanCompiler::stats() const { return shared_->get(); }

} // namespace sinter::runtime::vulkan
