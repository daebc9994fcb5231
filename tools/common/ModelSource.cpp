// ModelSource.cpp - loading a tool's model: a file, or a synthetic preset.
#include "tools/common/ModelSource.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sinter/Status.h"
#include "tools/model/ModelConfig.h"
#include "tools/model/ModelFile.h"
#include "tools/model/Synthetic.h"

namespace sinter::tools {

absl::Status checkModelSource(const ModelSource &source) {
  if (source.path.empty() == source.synthetic.empty())
    return absl::InvalidArgumentError("give exactly one of --model PATH and --synthetic PRESET");
  if (!source.synthetic.empty() && !model::findPreset(source.synthetic).ok()) {
    std::vector<std::string> names;
    for (const model::Preset &p : model::presets())
      names.push_back(p.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "--synthetic: '", source.synthetic, "' is no preset; valid: ", absl::StrJoin(names, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> loadModel(const ModelSource &source) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  LoadedModel m;
  if (!source.synthetic.empty()) {
    model::SyntheticOptions so;
    const model::WeightFormat format = source.dtype.value_or(model::WeightFormat{});
    so.dtype = format.dtype;
    so.mix = format.mix;
    so.seed = source.seed;
    SINTER_ASSIGN_OR_RETURN(m.weights, model::generatePreset(source.synthetic, so, &m.kept));
    m.description = absl::StrFormat("synthetic %s (seed %u)", source.synthetic, source.seed);
    m.shortName = source.synthetic;
  } else {
    SINTER_ASSIGN_OR_RETURN(m.weights, model::loadModelFile(source.path, &m.gguf));
    m.description = absl::StrCat(source.path, m.gguf ? " (GGUF)" : " (llama2.c)");
    const size_t slash = source.path.find_last_of('/');
    m.shortName = slash == std::string::npos ? source.path : source.path.substr(slash + 1);
    if (source.dtype)
      SINTER_RETURN_IF_ERROR(model::quantizeMatrices(m.weights, *source.dtype, &m.kept));
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const model::NamedTensor &nt : model::namedTensors(m.weights))
    m.bytes += nt.tensor->data.size();
  const std::string dtype = source.dtype && source.dtype->mix != model::WeightMix::None
                                ? model::weightFormatName(*source.dtype)
                                : dtypeName(m.weights.layers[0].wq.dtype);
  absl::StrAppend(&m.shortName, " ", dtype);
  absl::StrAppendFormat(&m.description, ": %s; matrices %s, %.1f MB",
                        model::describeConfig(m.weights.config), dtype, m.bytes / 1e6);
  return m;
}

} // namespace sinter::tools
