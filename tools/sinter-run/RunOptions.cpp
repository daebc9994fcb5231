// RunOptions.cpp - flag table, parser and help text of sinter-run.
//
// Flags take their argument as the next word or after '=' (--steps 8, --steps=8).
#include "tools/sinter-run/RunOptions.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sinter/Status.h"

namespace sinter::run {
namespace {

using tools::badValue;
using tools::Flag;
using tools::parseFloat;
using tools::parseInt;

const std::vector<Flag<RunOptions>> &flags() {
  using S = absl::Status;
  using O = RunOptions;
  using V = const std::string &;
  static const std::vector<Flag<O>> kFlags = [] {
    std::vector<Flag<O>> f;
    tools::appendFlags(f, tools::modelFlags(), &O::model);
    f.push_back({"--write-gguf", "PATH", "write the model (after --dtype) as a GGUF v3 file",
                 [](O &o, V v) {
                   o.writeGguf = v;
                   return S();
                 }});
    tools::appendFlags(f, tools::backendFlags(), &O::backend);
    std::vector<Flag<O>> rest = {
        {"--list-devices", nullptr, "list the devices Sinter can run on, then exit",
         [](O &o, V) {
           o.listDevices = true;
           return S();
         }},
        {"--steps", "N", "tokens to generate after the prompt (default 16; 0 runs the prompt only)",
         [](O &o, V v) { return parseInt("--steps", v, &o.steps); }},
        {"--prompt", "IDS", "comma-separated prompt token ids (default 1, BOS)",
         [](O &o, V v) {
           o.prompt.clear();
           for (absl::string_view part : absl::StrSplit(v, ',')) {
             uint32_t id;
             if (!absl::SimpleAtoi(part, &id))
               return badValue("--prompt", v, "is not a list of token ids such as 1,450,22");
             o.prompt.push_back(id);
           }
           return S();
         }},
        {"--temperature", "T", "sampling temperature; 0 is greedy argmax (default 0)",
         [](O &o, V v) { return parseFloat("--temperature", v, &o.temperature); }},
        {"--top-p", "P",
         "nucleus sampling: keep the tokens whose probability reaches P, 0 < P <= 1 (default 1)",
         [](O &o, V v) {
           SINTER_RETURN_IF_ERROR(parseFloat("--top-p", v, &o.topP));
           if (o.topP <= 0 || o.topP > 1)
             return badValue("--top-p", v, "is outside (0, 1]");
           return S();
         }},
        {"--sample-seed", "N", "seed of the sampler (default 1)",
         [](O &o, V v) { return parseInt("--sample-seed", v, &o.sampleSeed); }},
        {"--no-stop", nullptr, "keep generating when BOS (token 1) is produced",
         [](O &o, V) {
           o.stopAtBos = false;
           return S();
         }},
        {"--context", "N",
         "KV cache positions (default prompt + steps, at most the model's context length)",
         [](O &o, V v) { return parseInt("--context", v, &o.context); }},
        {"--matmul", nullptr, "issue F32 weight matrices as matmul instead of quantized_matmul",
         [](O &o, V) {
           o.matmul = true;
           return S();
         }},
        {"--check", nullptr,
         "run the reference backend alongside and report the first position where the greedy "
         "choices differ (exit status 3 when they do)",
         [](O &o, V) {
           o.check = true;
           return S();
         }},
        {"--quiet", nullptr, "print only the generated token ids",
         [](O &o, V) {
           o.quiet = true;
           return S();
         }},
        {"--json", "PATH",
         "also write the run's record (model, backend, device, times, counters) as one JSON "
         "object to PATH; \"-\" writes it to stdout instead of the report",
         [](O &o, V v) {
           if (v.empty())
             return badValue("--json", v, "is no path (\"-\" is stdout)");
           o.json = v;
           return S();
         }},
        {"--help", nullptr, "show this text",
         [](O &o, V) {
           o.help = true;
           return S();
         }},
    };
    for (Flag<O> &flag : rest)
      f.push_back(std::move(flag));
    return f;
  }();
  return kFlags;
}

} // namespace

absl::StatusOr<RunOptions> parseRunOptions(int argc, const char *const *argv) {
  RunOptions o;
  SINTER_RETURN_IF_ERROR(tools::parseFlags(argc, argv, flags(), o));
  if (o.help || o.listDevices)
    return o;
  SINTER_RETURN_IF_ERROR(tools::checkModelSource(o.model));
  if (o.prompt.empty())
    return absl::InvalidArgumentError("--prompt: needs at least one token id");
  return o;
}

std::string helpText() {
  std::string out =
      "sinter-run: decode a Llama-family model through a ComputeBackend.\n\n"
      "usage: sinter-run (--model PATH | --synthetic PRESET) [options]\n"
      "       sinter-run --list-devices\n\n"
      "Prints the backend that ran, the generated token ids (and text when the model has a\n"
      "vocabulary), then where the time went: load (model, backend start, weights to the\n"
      "backend), plan compilation, prompt and generation (ms a token, tokens/s; compilation\n"
      "left out), and the calls, kernels and queue submissions a token. A progress line goes\n"
      "to stderr on long runs.\n\noptions:\n";
  out += tools::flagsHelp(flags());
  absl::StrAppend(&out, "\nenvironment: SINTER_BACKEND and SINTER_DISABLE_FUSION, as the library "
                        "reads them\n(docs/ENVIRONMENT.md); --backend and --disable-fusion "
                        "override them.\n");
  absl::StrAppend(&out, "\nexamples:\n"
                        "  sinter-run --model ../shared/models/stories260K.bin --steps 40\n"
                        "  sinter-run --list-devices\n"
                        "  sinter-run --synthetic tinyllama-1.1b --dtype q4_0 --backend reference "
                        "--steps 2\n");
  return out;
}

} // namespace sinter::run
