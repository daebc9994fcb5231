// ToolFlags.h - the command-line parsing sinter-run and sinter-bench share: a table of flags
// (name, argument, help line, how to apply it), the parser over it, the help text, and the flags
// both tools take (the model to load and the backend to run it on).
//
// Flags take their argument as the next word or after '=' (--steps 8, --steps=8). Every flag has
// one definition, so the help text cannot drift from what the parser accepts.
#ifndef SINTER_TOOLS_COMMON_TOOLFLAGS_H
#define SINTER_TOOLS_COMMON_TOOLFLAGS_H

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sinter/Factory.h"
#include "tools/common/ModelSource.h"

namespace sinter::tools {

/// One flag of a tool whose options are an `O`.
template <typename O> struct Flag {
  std::string name;
  const char *arg; ///< nullptr for a switch
  std::string help;
  std::function<absl::Status(O &, const std::string &)> apply;
};

/// InvalidArgument "FLAG: 'VALUE' WHY".
absl::Status badValue(const std::string &flag, const std::string &value, const std::string &why);

/// A non-negative integer that fits T, or badValue.
template <typename T> absl::Status parseInt(const std::string &flag, const std::string &v, T *out) {
  uint64_t n;
  if (!absl::SimpleAtoi(v, &n) || n > std::numeric_limits<T>::max())
    return badValue(flag, v, "is not a non-negative integer in range");
  *out = T(n);
  return absl::OkStatus();
}

/// A finite non-negative number, or badValue.
absl::Status parseFloat(const std::string &flag, const std::string &v, float *out);

/// Parses argv[1..argc) into `o`: InvalidArgument for an unknown flag, a missing argument, an
/// argument given to a switch, or whatever a flag's apply says of its value.
template <typename O>
absl::Status parseFlags(int argc, const char *const *argv, const std::vector<Flag<O>> &flags,
                        O &o) {
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i], value;
    const size_t eq = word.find('=');
    const bool inlineValue = word.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inlineValue) {
      value = word.substr(eq + 1);
      word = word.substr(0, eq);
    }
    const Flag<O> *flag = nullptr;
    for (const Flag<O> &f : flags)
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
  return absl::OkStatus();
}

/// "  --name ARG   help..." for each flag, the help wrapped at 100 columns.
std::string flagLine(const std::string &name, const char *arg, const std::string &help);
template <typename O> std::string flagsHelp(const std::vector<Flag<O>> &flags) {
  std::string out;
  for (const Flag<O> &f : flags)
    out += flagLine(f.name, f.arg, f.help);
  return out;
}

/// The backend flags both tools take.
struct BackendFlags {
  /// --backend; unset: SINTER_BACKEND, else "auto" (a known kind: checked when parsed)
  std::optional<std::string> kind;
  /// --disable-fusion (checked names); unset: SINTER_DISABLE_FUSION
  std::optional<std::vector<std::string>> disabledFusions;
  std::string device; ///< --device
  bool fusion = true; ///< --fusion on|off
};

/// --model, --synthetic, --dtype and --seed.
std::vector<Flag<ModelSource>> modelFlags();
/// --backend, --disable-fusion, --device and --fusion.
std::vector<Flag<BackendFlags>> backendFlags();

/// `flags` over a part of O (e.g. modelFlags() over O::model).
template <typename O, typename Part>
void appendFlags(std::vector<Flag<O>> &out, const std::vector<Flag<Part>> &flags, Part O::*part) {
  for (const Flag<Part> &f : flags)
    out.push_back({f.name, f.arg, f.help, [apply = f.apply, part](O &o, const std::string &v) {
                     return apply(o.*part, v);
                   }});
}

/// The backend options: "auto", then SINTER_BACKEND and SINTER_DISABLE_FUSION, then the flags.
absl::StatusOr<BackendOptions> backendOptions(const BackendFlags &flags);

} // namespace sinter::tools

#endif // SINTER_TOOLS_COMMON_TOOLFLAGS_H
