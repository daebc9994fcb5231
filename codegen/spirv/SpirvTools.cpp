// SpirvTools.cpp - the SPIRV-Tools validator, optimizer and disassembler behind Status results.
//
// Every module the code generator emits goes through the validator before and after the
// optimizer (STYLE.md: "Every SPIR-V module a test produces goes through the validator"), so a
// broken lowering is an error Status with the validator's own words, never a driver crash.
#include "codegen/spirv/SpirvTools.h"

#include "absl/strings/str_cat.h"
#include "sinter/Status.h"
#include "spirv-tools/libspirv.hpp"
#include "spirv-tools/optimizer.hpp"

namespace sinter::codegen {

namespace {

constexpr spv_target_env kEnv = SPV_ENV_VULKAN_1_1;

// Collects the messages SPIRV-Tools reports into one string.
struct MessageSink {
  std::string text;
  void attach(spvtools::SpirvTools &tools) {
    tools.SetMessageConsumer(
        [this](spv_message_level_t, const char *, const spv_position_t &pos, const char *message) {
          absl::StrAppend(&text, text.empty() ? "" : "; ", "word ", pos.index, ": ", message);
        });
  }
};

} // namespace

absl::Status validateSpirv(const std::vector<uint32_t> &words) {
  spvtools::SpirvTools tools(kEnv);
  MessageSink sink;
  sink.attach(tools);
  spvtools::ValidatorOptions options;
  if (!tools.Validate(words.data(), words.size(), options))
    return absl::InternalError(absl::StrCat("spirv-val: ", sink.text));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> optimizeSpirv(const std::vector<uint32_t> &words) {
  spvtools::Optimizer optimizer(kEnv);
  std::string messages;
  optimizer.SetMessageConsumer(
      [&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
        absl::StrAppend(&messages, messages.empty() ? "" : "; ", message);
      });
  optimizer.RegisterPerformancePasses();
  std::vector<uint32_t> out;
  if (!optimizer.Run(words.data(), words.size(), &out))
    return absl::InternalError(absl::StrCat("spirv-opt: ", messages));
  return out;
}

absl::StatusOr<std::vector<uint32_t>> assembleSpirv(const std::string &text) {
  spvtools::SpirvTools tools(kEnv);
  MessageSink sink;
  sink.attach(tools);
  std::vector<uint32_t> words;
  if (!tools.Assemble(text, &words))
    return absl::InvalidArgumentError(absl::StrCat("spirv-as: ", sink.text));
  SINTER_RETURN_IF_ERROR(validateSpirv(words));
  return words;
}

absl::StatusOr<std::string> disassembleSpirv(const std::vector<uint32_t> &words) {
  spvtools::SpirvTools tools(kEnv);
  MessageSink sink;
  sink.attach(tools);
  std::string text;
  if (!tools.Disassemble(words, &text,
                         SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES |
                             SPV_BINARY_TO_TEXT_OPTION_INDENT))
    return absl::InvalidArgumentError(absl::StrCat("spirv-dis: ", sink.text));
  return text;
}

} // namespace sinter::codegen
