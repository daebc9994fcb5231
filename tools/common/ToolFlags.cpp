// ToolFlags.cpp - the flag helpers and the model and backend flags of the tools.
#include "tools/common/ToolFlags.h"

#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sinter/Status.h"
#include "tools/model/ModelConfig.h"

namespace sinter::tools {

absl::Status badValue(const std::string &flag, const std::string &value, const std::string &why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", value, "' ", why));
}

absl::Status parseFloat(const std::string &flag, const std::string &v, float *out) {
  if (!absl::SimpleAtof(v, out) || !std::isfinite(*out) || *out < 0)
    return badValue(flag, v, "is not a non-negative number");
  return absl::OkStatus();
}

std::string flagLine(const std::string &name, const char *arg, const std::string &help) {
  std::string left = arg ? absl::StrCat(name, " ", arg) : name;
  std::string out =
      absl::StrCat("  ", left, std::string(left.size() < 22 ? 22 - left.size() : 1, ' '));
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
  return out;
}

std::vector<Flag<ModelSource>> modelFlags() {
  using S = absl::Status;
  using O = ModelSource;
  using V = const std::string &;
  std::vector<std::string> presets;
  for (const model::Preset &p : model::presets())
    presets.push_back(p.name);
  return {
      {"--model", "PATH", "model file: a llama2.c checkpoint or a GGUF file (llama architecture)",
       [](O &o, V v) {
         o.path = v;
         return S();
       }},
      {"--synthetic", "PRESET",
       absl::StrCat("generate a model with deterministic random weights (presets: ",
                    absl::StrJoin(presets, ", "), ")"),
       [](O &o, V v) {
         o.synthetic = v;
         return S();
       }},
      {"--dtype", "DTYPE",
       "weight format: of a synthetic model (default f32), or to requantize the matrices of a "
       "loaded model to (e.g. q8_0, q4_0, q5_k), or a per-tensor mix as llama.cpp makes them "
       "(q4_k_m, q5_k_m: Q6_K for the classifier and some attn_v/ffn_down); matrices whose rows "
       "are not whole blocks stay as they are (a mix falls back to q5_0/q5_1/q8_0, then f32)",
       [](O &o, V v) {
         model::WeightFormat f;
         if (!model::parseWeightFormat(v, &f))
           return badValue("--dtype", v,
                           "is not a dtype name (f32, f16, bf16, q4_0, q8_0, q4_k, ...) or a mix "
                           "(q4_k_m, q5_k_m)");
         o.dtype = f;
         return S();
       }},
      {"--seed", "N", "seed of the synthetic weights (default 1)",
       [](O &o, V v) { return parseInt("--seed", v, &o.seed); }},
  };
}

std::vector<Flag<BackendFlags>> backendFlags() {
  using S = absl::Status;
  using O = BackendFlags;
  using V = const std::string &;
  return {
      {"--backend", "KIND",
       "auto (vulkan on a GPU, else cpu; lavapipe does not count), reference, cpu, vulkan or "
       "lazy (default: SINTER_BACKEND, else auto)",
       [](O &o, V v) {
         if (!absl::c_linear_search(backendKinds(), v))
           return badValue(
               "--backend", v,
               absl::StrCat("is no backend kind; valid: ", absl::StrJoin(backendKinds(), ", ")));
         o.kind = v;
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
       "the device to run on: an index or a part of a name from sinter-run --list-devices, or "
       "cpu (default: the backend's choice)",
       [](O &o, V v) {
         o.device = v;
         return S();
       }},
      {"--fusion", "on|off", "fusion in the lazy backends (default on)",
       [](O &o, V v) {
         if (v != "on" && v != "off")
           return badValue("--fusion", v, "is neither on nor off");
         o.fusion = v == "on";
         return S();
       }},
  };
}

absl::StatusOr<BackendOptions> backendOptions(const BackendFlags &flags) {
  BackendOptions defaults;
  defaults.kind = "auto";
  SINTER_ASSIGN_OR_RETURN(BackendOptions b, optionsFromEnvironment(defaults));
  if (flags.kind)
    b.kind = *flags.kind;
  if (flags.disabledFusions)
    b.disabledFusions = *flags.disabledFusions;
  b.fusion = flags.fusion;
  b.device = flags.device;
  return b;
}

} // namespace sinter::tools
