// RunOptions.cpp - flag table, parser and help text of sinter-run.
//
// Flags take their argument as the next word or after '=' (--steps 8, --steps=8).
#include "tools/sinter-run/RunOptions.h"

#include <cmath>
#include <functional>
#include <limits>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sinter/Factory.h"
#include "sinter/Status.h"
#include "tools/model/ModelConfig.h"

namespace sinter::run {
namespace {

struct Flag {
  const char *name;
  const char *arg; ///< nullptr for a switch
  const char *help;
  std::function<absl::Status(RunOptions &, const std::string &)> apply;
};

absl::Status bad(const char *flag, const std::string &value, const std::string &why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", value, "' ", why));
}

template <typename T> absl::Status parseInt(const char *flag, const std::string &v, T *out) {
  uint64_t n;
  if (!absl::SimpleAtoi(v, &n) || n > std::numeric_limits<T>::max())
    return bad(flag, v, "is not a non-negative integer in range");
  *out = T(n);
  return absl::OkStatus();
}

absl::Status parseFloat(const char *flag, const std::string &v, float *out) {
  if (!absl::SimpleAtof(v, out) || !std::isfinite(*out) || *out < 0)
    return bad(flag, v, "is not a non-negative number");
  return absl::OkStatus();
}

std::string presetNames() {
  std::vector<std::string> names;
  for (const model::Preset &p : model::presets())
    names.push_back(p.name);
  return absl::StrJoin(names, ", ");
}

const std::vector<Flag> &flags() {
  using S = absl::Status;
  using O = RunOptions;
  using V = const std::string &;
  static const std::vector<Flag> kFlags = {
      {"--model", "PATH", "model file: a llama2.c checkpoint or a GGUF file (llama architecture)",
       [](O &o, V v) {
         o.modelPath = v;
         return S();
       }},
      {"--synthetic", "PRESET", nullptr, // help filled in by helpText (lists the presets)
       [](O &o, V v) {
         o.synthetic = v;
         return S();
       }},
      {"--dtype", "DTYPE",
       "weight format: of a synthetic model (default f32), or to requantize the matrices of a "
       "loaded model to (e.g. q8_0, q4_0); matrices whose rows are not whole blocks stay as they "
       "are",
       [](O &o, V v) {
         DType d;
         if (!parseDType(v, &d))
           return bad("--dtype", v, "is not a dtype name (f32, f16, bf16, q4_0, q8_0, q4_k, ...)");
         o.dtype = d;
         return S();
       }},
      {"--seed", "N", "seed of the synthetic weights (default 1)",
       [](O &o, V v) { return parseInt("--seed", v, &o.seed); }},
      {"--write-gguf", "PATH", "write the model (after --dtype) as a GGUF v3 file",
       [](O &o, V v) {
         o.writeGguf = v;
         return S();
       }},
      {"--backend", "KIND",
       "auto (vulkan on a GPU, else cpu; lavapipe does not count), reference, cpu, vulkan or "
       "lazy (default: SINTER_BACKEND, else auto)",
       [](O &o, V v) {
         if (!absl::c_linear_search(backendKinds(), v))
           return bad(
               "--backend", v,
               absl::StrCat("is no backend kind; valid: ", absl::StrJoin(backendKinds(), ", ")));
         o.backend = v;
         return S();
       }},
      {"--disable-fusion", "LIST",
       "\"all\" or a comma list of fusion patterns to switch off (default: SINTER_DISABLE_FUSION)",
       [](O &o, V v) {
         std::vector<std::string> names;
         SINTER_RETURN_IF_ERROR(addDisabledFusions(v, "--disable-fusion", names));
         o.disabledFusions = std::move(names);
         return S();
       }},
      {"--device", "DEVICE",
       "the device to run on: an index or a part of a name from --list-devices, or cpu "
       "(default: the backend's choice)",
       [](O &o, V v) {
         o.device = v;
         return S();
       }},
      {"--list-devices", nullptr, "list the devices Sinter can run on, then exit",
       [](O &o, V) {
         o.listDevices = true;
         return S();
       }},
      {"--fusion", "on|off", "fusion in the lazy backends (default on)",
       [](O &o, V v) {
         if (v != "on" && v != "off")
           return bad("--fusion", v, "is neither on nor off");
         o.fusion = v == "on";
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
             return bad("--prompt", v, "is not a list of token ids such as 1,450,22");
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
           return bad("--top-p", v, "is outside (0, 1]");
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
      {"--help", nullptr, "show this text",
       [](O &o, V) {
         o.help = true;
         return S();
       }},
  };
  return kFlags;
}

} // namespace

absl::StatusOr<RunOptions> parseRunOptions(int argc, const char *const *argv) {
  RunOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i], value;
    const size_t eq = word.find('=');
    const bool inlineValue = word.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inlineValue) {
      value = word.substr(eq + 1);
      word = word.substr(0, eq);
    }
    const Flag *flag = nullptr;
    for (const Flag &f : flags())
      if (word == f.name)
        flag = &f;
    if (!flag)
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", argv[i], "' (see --help)"));
    if (flag->arg && !inlineValue) {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(
            absl::StrCat(flag->name, " needs an argument ", flag->arg));
      value = argv[++i];
    } else if (!flag->arg && inlineValue) {
      return absl::InvalidArgumentError(absl::StrCat(flag->name, " takes no argument"));
    }
    if (absl::Status s = flag->apply(o, value); !s.ok())
      return s;
  }
  if (o.help || o.listDevices)
    return o;
  if (o.modelPath.empty() == o.synthetic.empty())
    return absl::InvalidArgumentError("give exactly one of --model PATH and --synthetic PRESET");
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
      "vocabulary) and tokens/s. A progress line goes to stderr on long runs.\n\noptions:\n";
  for (const Flag &f : flags()) {
    std::string left = f.arg ? absl::StrCat(f.name, " ", f.arg) : f.name;
    const std::string help =
        f.help ? f.help
               : absl::StrCat("generate a model with deterministic random weights (presets: ",
                              presetNames(), ")");
    absl::StrAppend(&out, "  ", left, std::string(left.size() < 22 ? 22 - left.size() : 1, ' '));
    // Wrap the help at 100 columns, continuation lines indented under the first.
    size_t column = 24;
    for (absl::string_view word : absl::StrSplit(help, ' ')) {
      if (column + word.size() > 100 && column > 24) {
        absl::StrAppend(&out, "\n", std::string(24, ' '));
        column = 24;
      }
      absl::StrAppend(&out, word, " ");
      column += word.size() + 1;
    }
    out.back() = '\n';
  }
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
