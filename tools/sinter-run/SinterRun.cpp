// SinterRun.cpp - sinter-run: load or generate a model, decode it on a backend, report.
//
// This is the project's main job: the same engine (tools/model) on any ComputeBackend, with
// --check running the reference backend on the same tokens so that a backend's first wrong
// position is visible at once.
#include <cerrno>
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
#include "tools/common/DecodeStats.h"
#include "tools/common/ModelSource.h"
#include "tools/common/ToolFlags.h"
#include "tools/model/Decoder.h"
#include "tools/model/GgufModel.h"
#include "tools/model/GgufWriter.h"
#include "tools/sinter-run/RunOptions.h"

namespace sinter::run {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int kExitMismatch = 3;

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

// What one run measured (tools/common/DecodeStats.h): the load's parts, and the decode steps of
// the prompt and of generation. Plan compilation is timed by the backend and left out of the
// per-token times; --check's reference decode is timed apart and in no phase.
struct Timings {
  double modelSeconds = 0;  ///< reading or generating the model
  double startSeconds = 0;  ///< creating the backend (device, JIT)
  double uploadSeconds = 0; ///< Decoder::create: the weights to the backend
  double checkSeconds = 0;  ///< the reference decode of --check
  tools::Phase prompt, generation;
  bool counted = false; ///< the backend keeps counters (not the reference)
  double loadSeconds() const { return modelSeconds + startSeconds + uploadSeconds; }
  double compileSeconds() const {
    return prompt.counters.compileSeconds + generation.counters.compileSeconds;
  }
  uint64_t plansCompiled() const {
    return prompt.counters.plansCompiled + generation.counters.plansCompiled;
  }
  double decodeSeconds() const { return prompt.seconds + generation.seconds; }
};

std::string plural(uint64_t n, const char *word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

// The lines after the tokens: where the time went and what a token cost.
void printTimings(const Timings &t, const ComputeBackend &backend) {
  std::printf("load: %.3f s (model %.3f s, backend start %.3f s, weights to the backend %.3f s)\n",
              t.loadSeconds(), t.modelSeconds, t.startSeconds, t.uploadSeconds);
  if (t.counted)
    std::printf("compile: %.3f s, %s (left out of the prompt and generation times)\n",
                t.compileSeconds(), plural(t.plansCompiled(), "plan").c_str());
  else
    std::printf("compile: none (%s compiles no plans)\n", backend.name().c_str());
  std::printf("prompt: %s, %.3f ms a token\n", plural(t.prompt.tokens, "token").c_str(),
              t.prompt.msPerToken());
  const tools::Phase &g = t.generation;
  if (g.tokens)
    std::printf("generation: %s, %.3f ms a token, %.2f tokens/s\n",
                plural(g.tokens, "token").c_str(), g.msPerToken(), g.tokensPerSecond());
  else
    std::printf("generation: none (no generated token was fed back)\n");
  const tools::Phase &p = g.tokens ? g : t.prompt;
  if (!t.counted || !p.tokens) {
    std::printf("per token: not counted (%s keeps no counters)\n", backend.name().c_str());
    return;
  }
  std::string line = absl::StrFormat("per token: %.0f calls, %.0f kernels, %.1f flushes",
                                     p.perToken(p.counters.calls), p.perToken(p.counters.kernels),
                                     p.perToken(p.counters.flushes));
  if (p.counters.submissions)
    absl::StrAppendFormat(&line, ", %.1f queue submissions", p.perToken(*p.counters.submissions));
  std::printf("%s (%s)\n", line.c_str(), g.tokens ? "generation" : "prompt");
}

std::string phaseJson(const tools::Phase &p, bool counted) {
  tools::JsonObject j;
  j.add("tokens", p.tokens).add("seconds", p.seconds).add("compile_s", p.counters.compileSeconds);
  j.add("ms_per_token", p.msPerToken()).add("tokens_per_s", p.tokensPerSecond());
  if (counted && p.tokens) {
    j.add("calls_per_token", p.perToken(p.counters.calls));
    j.add("kernels_per_token", p.perToken(p.counters.kernels));
    j.add("flushes_per_token", p.perToken(p.counters.flushes));
    if (p.counters.submissions)
      j.add("submissions_per_token", p.perToken(*p.counters.submissions));
    else
      j.addNull("submissions_per_token");
  }
  return j.str();
}

absl::StatusOr<int> run(const RunOptions &o) {
  // Every backend setting is checked before the model loads: a typo costs nothing.
  SINTER_ASSIGN_OR_RETURN(const BackendOptions bopts, tools::backendOptions(o.backend));
  SINTER_ASSIGN_OR_RETURN(const BackendChoice choice, resolveBackend(bopts));
  warnAboutSoftwareVulkan(choice);
  const bool jsonOnly = o.json == "-";
  const bool report = !o.quiet && !jsonOnly;
  Timings t;
  SINTER_ASSIGN_OR_RETURN(tools::LoadedModel loaded, tools::loadModel(o.model));
  t.modelSeconds = loaded.seconds;
  model::ModelWeights &weights = loaded.weights;
  if (report) {
    std::printf("model: %s\n", loaded.description.c_str());
    if (!loaded.kept.empty())
      std::printf("note: %zu matrices keep their format (rows not whole blocks), e.g. %s\n",
                  loaded.kept.size(), loaded.kept[0].c_str());
  }
  if (!o.writeGguf.empty()) {
    const std::string name = o.model.synthetic.empty() ? o.model.path : o.model.synthetic;
    SINTER_RETURN_IF_ERROR(model::writeGguf(model::ggufFromModel(weights, name), o.writeGguf));
    if (report)
      std::printf("wrote %s\n", o.writeGguf.c_str());
  }
  const model::ModelConfig config = weights.config;
  model::DecoderOptions dopts;
  dopts.maxContext = contextFor(o, config);
  dopts.f32AsMatmul = o.matmul;

  Clock::time_point mark = Clock::now();
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, createBackend(bopts));
  t.startSeconds = secondsSince(mark);
  mark = Clock::now();
  SINTER_ASSIGN_OR_RETURN(auto decoder, model::Decoder::create(*backend, weights, dopts));
  t.uploadSeconds = secondsSince(mark);
  std::unique_ptr<ComputeBackend> refBackend;
  std::unique_ptr<model::Decoder> refDecoder;
  if (o.check) {
    mark = Clock::now();
    BackendOptions referenceOptions;
    referenceOptions.kind = "reference";
    SINTER_ASSIGN_OR_RETURN(refBackend, createBackend(referenceOptions));
    SINTER_ASSIGN_OR_RETURN(refDecoder, model::Decoder::create(*refBackend, weights, dopts));
    t.checkSeconds += secondsSince(mark);
  }
  const std::vector<std::string> vocab = std::move(weights.vocab);
  weights = model::ModelWeights(); // the backends hold the weights now
  const DeviceInfo info = backend->deviceInfo();
  if (report)
    std::printf("backend: %s (%s, %s, %u compute units, %.1f MB allocated)\n",
                backend->name().c_str(), info.name.c_str(), backendKindName(info.kind),
                info.computeUnits, decoder->deviceBytes() / 1e6);
  if (report && !bopts.disabledFusions.empty())
    std::printf("fusion patterns off: %s\n", absl::StrJoin(bopts.disabledFusions, ", ").c_str());

  model::Sampler sampler({o.temperature, o.topP, o.sampleSeed});
  std::vector<float> refLogits(config.vocabSize);
  std::optional<uint32_t> firstMismatch;
  double worstNmse = 0;
  uint32_t positions = 0;
  const uint32_t promptSize = uint32_t(o.prompt.size());
  t.counted = tools::countersOf(*backend).has_value();
  Progress progress(promptSize + o.steps - 1);
  tools::StepClock clock(*backend);
  auto onStep = [&](uint32_t pos, uint32_t token, absl::Span<const float> logits,
                    uint32_t) -> absl::Status {
    clock.add(pos < promptSize ? t.prompt : t.generation);
    positions = pos + 1;
    progress.update(positions);
    if (refDecoder) { // timed apart: the backend's times leave it out
      const Clock::time_point refStart = Clock::now();
      SINTER_RETURN_IF_ERROR(refDecoder->step(token, pos, absl::MakeSpan(refLogits)));
      worstNmse = std::max(worstNmse, nmse(logits, refLogits));
      if (!firstMismatch && model::argmax(logits) != model::argmax(refLogits))
        firstMismatch = pos;
      t.checkSeconds += secondsSince(refStart);
    }
    clock.mark();
    return absl::OkStatus();
  };
  SINTER_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens,
                          model::generate(*decoder, o.prompt, o.steps, sampler,
                                          o.stopAtBos ? std::optional<uint32_t>(1) : std::nullopt,
                                          onStep));
  SINTER_RETURN_IF_ERROR(backend->synchronize());
  if (o.steps == 0) { // generate() ran the last prompt position without calling back
    clock.add(t.prompt);
    positions = t.prompt.tokens;
  }
  const double seconds = t.decodeSeconds();

  if (!o.json.empty()) {
    tools::JsonObject j;
    j.add("model", loaded.shortName).add("model_description", loaded.description);
    j.add("backend", backend->name()).add("kind", choice.kind).add("device", choice.device.name);
    j.add("device_kind", backendKindName(info.kind));
    j.add("positions", positions).add("generated", uint64_t(tokens.size()));
    j.add("load_s", t.loadSeconds()).add("model_s", t.modelSeconds);
    j.add("backend_start_s", t.startSeconds).add("upload_s", t.uploadSeconds);
    j.add("compile_s", t.compileSeconds()).add("plans_compiled", t.plansCompiled());
    j.add("decode_s", seconds);
    j.addRaw("prompt", phaseJson(t.prompt, t.counted));
    j.addRaw("generation", phaseJson(t.generation, t.counted));
    if (o.check) {
      j.add("check_s", t.checkSeconds).add("check_agrees", !firstMismatch);
      j.add("check_worst_nmse", worstNmse);
    }
    const std::string line = j.str() + "\n";
    if (jsonOnly) {
      std::fputs(line.c_str(), stdout);
    } else {
      FILE *f = std::fopen(o.json.c_str(), "w");
      if (!f || std::fputs(line.c_str(), f) < 0 || std::fclose(f) != 0)
        return absl::UnavailableError(
            absl::StrCat("--json: cannot write ", o.json, ": ", std::strerror(errno)));
    }
  }
  if (jsonOnly)
    return firstMismatch ? kExitMismatch : 0;
  std::printf("%s%s\n", o.quiet ? "" : "tokens: ", absl::StrJoin(tokens, " ").c_str());
  if (o.quiet)
    return firstMismatch ? kExitMismatch : 0;
  if (!vocab.empty())
    std::printf("text: %s\n", tokenText(vocab, tokens).c_str());
  std::printf("speed: %u positions (%zu prompt, %zu generated) in %.3f s: %.2f tokens/s "
              "(compilation included)\n",
              positions, o.prompt.size(), tokens.size(), seconds,
              seconds > 0 ? positions / seconds : 0.0);
  printTimings(t, *backend);
  if (!o.check)
    return 0;
  if (firstMismatch) {
    std::printf("check: %s and reference disagree first at position %u (worst logits NMSE %.3g); "
                "the reference took %.3f s, not counted above\n",
                backend->name().c_str(), *firstMismatch, worstNmse, t.checkSeconds);
    return kExitMismatch;
  }
  std::printf("check: %s agrees with reference at all %u positions (worst logits NMSE %.3g); "
              "the reference took %.3f s, not counted above\n",
              backend->name().c_str(), positions, worstNmse, t.checkSeconds);
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
