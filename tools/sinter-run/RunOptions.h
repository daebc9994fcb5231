// RunOptions.h - the command line of sinter-run.
//
// Parsing is kept apart from main() so that every flag has one definition (name, argument, help
// line) and the help text cannot drift from what the parser accepts. The model and backend flags
// are sinter-bench's too (tools/common/ToolFlags.h).
#ifndef SINTER_TOOLS_SINTERRUN_RUNOPTIONS_H
#define SINTER_TOOLS_SINTERRUN_RUNOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/DType.h"
#include "tools/common/ModelSource.h"
#include "tools/common/ToolFlags.h"

namespace sinter::run {

/// Everything sinter-run was asked to do.
struct RunOptions {
  tools::ModelSource model;           ///< --model, --synthetic, --dtype, --seed
  std::string writeGguf;              ///< --write-gguf
  tools::BackendFlags backend;        ///< --backend, --disable-fusion, --device, --fusion
  bool listDevices = false;           ///< --list-devices
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
  std::string json;                   ///< --json: a path, or "-" for stdout
  bool help = false;                  ///< --help
};

/// Parses argv[1..argc). InvalidArgument naming the flag for an unknown flag, a missing or bad
/// argument (an unknown backend kind, fusion pattern or preset among them, listing the valid
/// names), or a contradictory combination (neither or both of --model and --synthetic).
absl::StatusOr<RunOptions> parseRunOptions(int argc, const char *const *argv);

/// The --help text.
std::string helpText();

} // namespace sinter::run

#endif // SINTER_TOOLS_SINTERRUN_RUNOPTIONS_H
