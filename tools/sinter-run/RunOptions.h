// RunOptions.h - the command line of sinter-run.
//
// Parsing is kept apart from main() so that every flag has one definition (name, argument, help
// line) and the help text cannot drift from what the parser accepts.
#ifndef SINTER_TOOLS_SINTERRUN_RUNOPTIONS_H
#define SINTER_TOOLS_SINTERRUN_RUNOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/DType.h"

namespace sinter::run {

/// Everything sinter-run was asked to do.
struct RunOptions {
  std::string modelPath;      ///< --model
  std::string synthetic;      ///< --synthetic
  std::optional<DType> dtype; ///< --dtype
  uint64_t seed = 1;          ///< --seed (synthetic weights)
  std::string writeGguf;      ///< --write-gguf
  /// --backend; unset: SINTER_BACKEND, else "auto" (a known kind: checked when parsed)
  std::optional<std::string> backend;
  /// --disable-fusion (checked names); unset: SINTER_DISABLE_FUSION
  std::optional<std::vector<std::string>> disabledFusions;
  std::string device;                 ///< --device
  bool listDevices = false;           ///< --list-devices
  bool fusion = true;                 ///< --fusion on|off
  uint32_t steps = 16;                ///< --steps
  std::vector<uint32_t> prompt = {1}; ///< --prompt
  float temperature = 0.0f;           ///< --temperature
  float topP = 1.0f;                  ///< --top-p
  uint64_t sampleSeed = 1;            ///< --sample-seed
  bool stopAtBos = true;              ///< --no-stop clears it
  uint32_t context = 0;               ///< --context
  bool matmul = false;                ///< --matmul
  bool check = false;                 ///< --check
  bool quiet = false;                 ///< --quiet
  bool help = false;                  ///< --help
};

/// Parses argv[1..argc). InvalidArgument naming the flag for an unknown flag, a missing or bad
/// argument (an unknown backend kind or fusion pattern among them, listing the valid names), or
/// a contradictory combination (neither or both of --model and --synthetic).
absl::StatusOr<RunOptions> parseRunOptions(int argc, const char *const *argv);

/// The --help text.
std::string helpText();

} // namespace sinter::run

#endif // SINTER_TOOLS_SINTERRUN_RUNOPTIONS_H
