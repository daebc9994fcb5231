// BenchOptions.cpp - flag table, parser and help text of sinter-bench.
#include "tools/sinter-bench/BenchOptions.h"

#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sinter/Factory.h"
#include "sinter/Status.h"
#include "tools/model/ModelConfig.h"

namespace sinter::bench {
namespace {

using tools::badValue;
using tools::Flag;

// A comma list of integers of at least `least`, e.g. "32" or "0,256,1024".
absl::Status parseCounts(const std::string &flag, const std::string &v, uint32_t least,
                         std::vector<uint32_t> *out) {
  std::vector<uint32_t> values;
  for (absl::string_view part : absl::StrSplit(v, ',')) {
    uint32_t n;
    if (!tools::parseInt(flag, std::string(part), &n).ok())
      return badValue(flag, v,
                      least ? "is not a positive integer (or a comma list of them)"
                            : "is not a non-negative integer (or a comma list of them)");
    if (n < least)
      return badValue(flag, v, absl::StrCat("must be at least ", least));
    values.push_back(n);
  }
  *out = std::move(values);
  return absl::OkStatus();
}

const std::vector<Flag<BenchOptions>> &flags() {
  using S = absl::Status;
  using O = BenchOptions;
  using V = const std::string &;
  static const std::vector<Flag<O>> kFlags = [] {
    std::vector<Flag<O>> f;
    f.push_back({"-m", "PATH", "the same as --model", [](O &o, V v) {
                   o.model.path = v;
                   return S();
                 }});
    tools::appendFlags(f, tools::modelFlags(), &O::model);
    f.push_back({"--backend", "KINDS",
                 "comma list of backend kinds, a row each: auto (vulkan on a GPU, else cpu), "
                 "reference, cpu, vulkan, lazy (default: SINTER_BACKEND, else auto)",
                 [](O &o, V v) {
                   o.backends.clear();
                   for (absl::string_view part : absl::StrSplit(v, ',')) {
                     if (!absl::c_linear_search(backendKinds(), part))
                       return badValue("--backend", v,
                                       absl::StrCat("holds '", part, "', no backend kind; valid: ",
                                                    absl::StrJoin(backendKinds(), ", ")));
                     o.backends.emplace_back(part);
                   }
                   return S();
                 }});
    std::vector<Flag<tools::BackendFlags>> backend = tools::backendFlags();
    backend.erase(absl::c_find_if(backend, [](const auto &b) { return b.name == "--backend"; }));
    tools::appendFlags(f, backend, &O::backend);
    std::vector<Flag<O>> rest = {
        {"-n", "N", "tokens timed a repetition, a comma list for a row each (default 32)",
         [](O &o, V v) { return parseCounts("-n", v, 1, &o.tokens); }},
        {"-r", "N",
         "repetitions a row; the table gives their mean and standard deviation "
         "(default 5)",
         [](O &o, V v) {
           if (!tools::parseInt("-r", v, &o.repetitions).ok() || o.repetitions == 0)
             return badValue("-r", v, "is not a positive integer");
           return S();
         }},
        {"--depth", "D",
         "positions of context filled before the timed ones (their K/V cache read each token), "
         "a comma list for a row each (default 0)",
         [](O &o, V v) { return parseCounts("--depth", v, 0, &o.depths); }},
        {"-d", "D", "the same as --depth",
         [](O &o, V v) { return parseCounts("-d", v, 0, &o.depths); }},
        {"--bandwidth", "GBPS",
         "the memory bandwidth the floor divides by, GB/s (default: measured now; on the host "
         "a streaming read, on a Vulkan device the copy probe of the Vulkan decode benchmark)",
         [](O &o, V v) {
           float gbps;
           if (!tools::parseFloat("--bandwidth", v, &gbps).ok() || gbps <= 0)
             return badValue("--bandwidth", v, "is not a positive number of GB/s");
           o.bandwidthGBps = gbps;
           return S();
         }},
        {"--json", nullptr, "print one JSON object a row instead of the table",
         [](O &o, V) {
           o.json = true;
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

absl::StatusOr<BenchOptions> parseBenchOptions(int argc, const char *const *argv) {
  BenchOptions o;
  SINTER_RETURN_IF_ERROR(tools::parseFlags(argc, argv, flags(), o));
  if (o.help)
    return o;
  SINTER_RETURN_IF_ERROR(tools::checkModelSource(o.model));
  if (!o.model.synthetic.empty()) {
    SINTER_ASSIGN_OR_RETURN(const model::Preset preset, model::findPreset(o.model.synthetic));
    SINTER_RETURN_IF_ERROR(checkPositions(o, preset.config.seqLen));
  }
  return o;
}

absl::Status checkPositions(const BenchOptions &o, uint32_t seqLen) {
  const uint32_t depth = *absl::c_max_element(o.depths), n = *absl::c_max_element(o.tokens);
  if (uint64_t(depth) + n > seqLen)
    return absl::InvalidArgumentError(absl::StrCat("--depth ", depth, " with -n ", n, " needs ",
                                                   uint64_t(depth) + n,
                                                   " positions; the model holds ", seqLen));
  return absl::OkStatus();
}

std::string benchHelpText() {
  std::string out =
      "sinter-bench: decode speed of a model on Sinter's backends, llama-bench style.\n\n"
      "usage: sinter-bench (-m PATH | --synthetic PRESET) [options]\n\n"
      "Each row times -n decode steps after --depth positions of context, -r times, after\n"
      "warm-up steps that compile the plans (compilation is never timed). It gives tokens/s\n"
      "(mean and standard deviation over the repetitions), the kernels and queue submissions a\n"
      "token, the bytes a token must read (weights, and the K/V cache up to the position) and\n"
      "the fraction of that floor reached at the bandwidth --bandwidth gives or, without it,\n"
      "one measured in the same run.\n\noptions:\n";
  out += tools::flagsHelp(flags());
  absl::StrAppend(&out, "\nexamples:\n"
                        "  sinter-bench -m ../shared/models/stories260K.bin --backend cpu,lazy\n"
                        "  sinter-bench --synthetic tinyllama-1.1b --dtype q4_0 -n 16 -r 3 "
                        "--depth 0,256\n");
  return out;
}

} // namespace sinter::bench
