// SinterRun.cpp - sinter-run: load or generate a model, decode it on a backend, report.
//
// This is the project's main job: the same engine (tools/model) on any ComputeBackend, with
// --check running the reference backend on the same tokens so that a backend's first wrong
// position is visible at once.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sinter/Devices.h"
#include "sinter/Factory.h"
#include "sinter/Status.h"
#include "tools/model/Decoder.h"
#include "tools/model/GgufModel.h"
#include "tools/model/GgufWriter.h"
#include "tools/model/ModelFile.h"
#include "tools/model/Synthetic.h"
#include "tools/sinter-run/RunOptions.h"

namespace sinter::run {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int kExitMismatch = 3;

absl::StatusOr<model::ModelWeights> loadModel(const RunOptions &o, std::string *what) {
  const Clock::time_point t0 = Clock::now();
  model::ModelWeights w;
  std::vector<std::string> kept;
  if (!o.synthetic.empty()) {
    model::SyntheticOptions so;
    so.dtype = o.dtype.value_or(DType::F32);
    so.seed = o.seed;
    SINTER_ASSIGN_OR_RETURN(w, model::generatePreset(o.synthetic, so, &kept));
    *what = absl::StrFormat("synthetic %s (seed %u)", o.synthetic, o.seed);
  } else {
    bool gguf = false;
    SINTER_ASSIGN_OR_RETURN(w, model::loadModelFile(o.modelPath, &gguf));
    *what = absl::StrCat(o.modelPath, gguf ? " (GGUF)" : " (llama2.c)");
    if (o.dtype)
      SINTER_RETURN_IF_ERROR(model::quantizeMatrices(w, *o.dtype, &kept));
  }
  uint64_t bytes = 0;
  for (const model::NamedTensor &nt : model::namedTensors(w))
    bytes += nt.tensor->data.size();
  absl::StrAppendFormat(what, ": %s; matrices %s, %.1f MB, %.2f s to load",
                        model::describeConfig(w.config), dtypeName(w.layers[0].wq.dtype),
                        bytes / 1e6, secondsSince(t0));
  if (!kept.empty())
    absl::StrAppendFormat(what,
                          "\nnote: %u matrices keep their format (rows not whole blocks), "
                          "e.g. %s",
                          kept.size(), kept[0]);
  return w;
}

std::string tokenText(const std::vector<std::string> &vocab, const std::vector<uint32_t> &ids) {
  std::string text;
  for (uint32_t id : ids)
    text += id < vocab.size() ? vocab[id] : "?";
  return absl::StrReplaceAll(text, {{"\u2581", " "}, {"<0x0A>", "\n"}});
}

// Prints "pos 12/40, 3.1 tokens/s" to stderr at most every half second on a terminal (every ten
// seconds otherwise), and only once a run has lasted two seconds.
class Progress {
public:
  explicit Progress(uint32_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void update(uint32_t done) {
    const double t = secondsSince(start_);
    if (t < 2.0 || t - last_ < (tty_ ? 0.5 : 10.0))
      return;
    last_ = t;
    shown_ = true;
    std::fprintf(stderr, "%spos %u/%u, %.2f tokens/s%s", tty_ ? "\r" : "", done, total_, done / t,
                 tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  ~Progress() {
    if (shown_ && tty_)
      std::fprintf(stderr, "\n");
  }

private:
  uint32_t total_;
  bool tty_;
  bool shown_ = false;
  double last_ = 0;
  Clock::time_point start_ = Clock::now();
};

double nmse(absl::Span<const float> out, absl::Span<const float> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

// One line on stderr for every value sinter-run changes instead of taking as given.
void note(const std::string &text) { std::fprintf(stderr, "sinter-run: note: %s\n", text.c_str()); }

// The backend options: "auto", then SINTER_BACKEND and SINTER_DISABLE_FUSION, then the flags.
absl::StatusOr<BackendOptions> backendOptions(const RunOptions &o) {
  BackendOptions defaults;
  defaults.kind = "auto";
  SINTER_ASSIGN_OR_RETURN(BackendOptions b, optionsFromEnvironment(defaults));
  if (o.backend)
    b.kind = *o.backend;
  if (o.disabledFusions)
    b.disabledFusions = *o.disabledFusions;
  b.fusion = o.fusion;
  b.device = o.device;
  return b;
}

// The positions the KV cache holds: --context (at most the model's), else prompt + steps (at
// most the model's), never fewer than the prompt. Every cut is a note.
uint32_t contextFor(const RunOptions &o, const model::ModelConfig &config) {
  const uint64_t prompt = o.prompt.size(), wanted = prompt + o.steps;
  uint64_t context = o.context ? o.context : std::max<uint64_t>(wanted, 1);
  if (o.context && o.context > config.seqLen)
    note(absl::StrFormat("--context %u is past the model's context length %u; using %u", o.context,
                         config.seqLen, config.seqLen));
  context = std::min<uint64_t>(context, config.seqLen);
  if (context < prompt) {
    const uint64_t raised = std::min<uint64_t>(prompt, config.seqLen);
    if (o.context && raised > context)
      note(absl::StrFormat("--context %u cannot hold the %u-token prompt; using %u", o.context,
                           prompt, raised));
    context = std::max(context, raised);
  }
  // Positions 0 .. context-1 each sample one token once the prompt is in.
  const uint64_t room = context + 1 >= prompt ? context + 1 - prompt : 0;
  if (o.steps > room)
    note(absl::StrFormat("--steps %u with a %u-token prompt does not fit a context of %u "
                         "positions; at most %u tokens are generated",
                         o.steps, prompt, context, room));
  return uint32_t(context);
}

// Says when the vulkan kind is about to run on a Vulkan implementation on the CPU (lavapipe):
// the same kernels far slower than the cpu kind, easy to mistake for a GPU run.
void warnAboutSoftwareVulkan(const BackendChoice &choice) {
  if (choice.kind == "vulkan" && choice.device.type == DeviceType::Software)
    std::fprintf(stderr,
                 "sinter-run: warning: the vulkan backend runs on %s, a software Vulkan "
                 "implementation on the CPU, far slower than --backend cpu\n",
                 choice.device.name.c_str());
}

int listDevices() {
  absl::StatusOr<std::vector<Device>> devices = sinter::listDevices();
  if (!devices.ok()) {
    std::fprintf(stderr, "sinter-run: %s\n", devices.status().ToString().c_str());
    return 1;
  }
  for (const Device &d : *devices)
    std::printf("%s\n", describeDevice(d).c_str());
  return 0;
}

absl::StatusOr<int> run(const RunOptions &o) {
  // Every backend setting is checked before the model loads: a typo costs nothing.
  SINTER_ASSIGN_OR_RETURN(const BackendOptions bopts, backendOptions(o));
  SINTER_ASSIGN_OR_RETURN(const BackendChoice choice, resolveBackend(bopts));
  warnAboutSoftwareVulkan(choice);
  std::string what;
  SINTER_ASSIGN_OR_RETURN(model::ModelWeights weights, loadModel(o, &what));
  if (!o.quiet)
    std::printf("model: %s\n", what.c_str());
  if (!o.writeGguf.empty()) {
    const std::string name = o.synthetic.empty() ? o.modelPath : o.synthetic;
    SINTER_RETURN_IF_ERROR(model::writeGguf(model::ggufFromModel(weights, name), o.writeGguf));
    if (!o.quiet)
      std::printf("wrote %s\n", o.writeGguf.c_str());
  }
  const model::ModelConfig config = weights.config;
  model::DecoderOptions dopts;
  dopts.maxContext = contextFor(o, config);
  dopts.f32AsMatmul = o.matmul;

  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, createBackend(bopts));
  SINTER_ASSIGN_OR_RETURN(auto decoder, model::Decoder::create(*backend, weights, dopts));
  std::unique_ptr<ComputeBackend> refBackend;
  std::unique_ptr<model::Decoder> refDecoder;
  if (o.check) {
    BackendOptions referenceOptions;
    referenceOptions.kind = "reference";
    SINTER_ASSIGN_OR_RETURN(refBackend, createBackend(referenceOptions));
    SINTER_ASSIGN_OR_RETURN(refDecoder, model::Decoder::create(*refBackend, weights, dopts));
  }
  const std::vector<std::string> vocab = std::move(weights.vocab);
  weights = model::ModelWeights(); // the backends hold the weights now
  const DeviceInfo info = backend->deviceInfo();
  if (!o.quiet)
    std::printf("backend: %s (%s, %s, %u compute units, %.1f MB allocated)\n",
                backend->name().c_str(), info.name.c_str(), backendKindName(info.kind),
                info.computeUnits, decoder->deviceBytes() / 1e6);
  if (!o.quiet && !bopts.disabledFusions.empty())
    std::printf("fusion patterns off: %s\n", absl::StrJoin(bopts.disabledFusions, ", ").c_str());

  model::Sampler sampler({o.temperature, o.topP, o.sampleSeed});
  std::vector<float> refLogits(config.vocabSize);
  std::optional<uint32_t> firstMismatch;
  double worstNmse = 0;
  uint32_t positions = 0;
  Progress progress(uint32_t(o.prompt.size()) + o.steps - 1);
  auto onStep = [&](uint32_t pos, uint32_t token, absl::Span<const float> logits,
                    uint32_t) -> absl::Status {
    positions = pos + 1;
    progress.update(positions);
    if (!refDecoder)
      return absl::OkStatus();
    SINTER_RETURN_IF_ERROR(refDecoder->step(token, pos, absl::MakeSpan(refLogits)));
    worstNmse = std::max(worstNmse, nmse(logits, refLogits));
    if (!firstMismatch && model::argmax(logits) != model::argmax(refLogits))
      firstMismatch = pos;
    return absl::OkStatus();
  };
  const Clock::time_point t0 = Clock::now();
  SINTER_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens,
                          model::generate(*decoder, o.prompt, o.steps, sampler,
                                          o.stopAtBos ? std::optional<uint32_t>(1) : std::nullopt,
                                          onStep));
  SINTER_RETURN_IF_ERROR(backend->synchronize());
  const double seconds = secondsSince(t0);

  std::printf("%s%s\n", o.quiet ? "" : "tokens: ", absl::StrJoin(tokens, " ").c_str());
  if (o.quiet)
    return firstMismatch ? kExitMismatch : 0;
  if (!vocab.empty())
    std::printf("text: %s\n", tokenText(vocab, tokens).c_str());
  std::printf("speed: %u positions (%zu prompt, %zu generated) in %.3f s: %.2f tokens/s\n",
              positions, o.prompt.size(), tokens.size(), seconds,
              seconds > 0 ? positions / seconds : 0.0);
  if (!o.check)
    return 0;
  if (firstMismatch) {
    std::printf("check: %s and reference disagree first at position %u (worst logits NMSE %.3g)\n",
                backend->name().c_str(), *firstMismatch, worstNmse);
    return kExitMismatch;
  }
  std::printf("check: %s agrees with reference at all %u positions (worst logits NMSE %.3g)\n",
              backend->name().c_str(), positions, worstNmse);
  return 0;
}

} // namespace
} // namespace sinter::run

int main(int argc, char **argv) {
  absl::StatusOr<sinter::run::RunOptions> options = sinter::run::parseRunOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "sinter-run: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(sinter::run::helpText().c_str(), stdout);
    return 0;
  }
  if (options->listDevices)
    return sinter::run::listDevices();
  absl::StatusOr<int> rc = sinter::run::run(*options);
  if (!rc.ok()) {
    std::fprintf(stderr, "sinter-run: %s\n", rc.status().ToString().c_str());
    return 1;
  }
  return *rc;
}
