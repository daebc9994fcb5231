// Env.cpp - parsing of the numeric SINTER_* variables (support/Env.h).
#include "support/Env.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace sinter {

absl::StatusOr<std::optional<uint64_t>> readEnvInteger(const EnvInteger &variable) {
  const char *text = std::getenv(variable.name);
  if (!text || !*text)
    return std::nullopt;
  // Digits only (absl::SimpleAtoi alone would take a sign, "+8", and surrounding spaces).
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  uint64_t value = 0;
  bool isNumber =
      !digits.empty() && absl::ascii_isdigit(digits[0]) && absl::SimpleAtoi(digits, &value);
  if (!isNumber || value < variable.min || value > variable.max)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is '%s': not an integer in [%d, %d]", variable.name, text, variable.min, variable.max));
  return value;
}

uint64_t envIntegerOr(const EnvInteger &variable, uint64_t fallback) {
  absl::StatusOr<std::optional<uint64_t>> value = readEnvInteger(variable);
  if (!value.ok()) {
    std::fprintf(stderr, "sinter: %s; using %llu\n", std::string(value.status().message()).c_str(),
                 static_cast<unsigned long long>(fallback));
    return fallback;
  }
  return value->value_or(fallback);
}

absl::Status checkLibraryEnvironment() {
  for (const EnvInteger &variable : {kEnvMaxTrace, kEnvOverlap, kEnvOverlapGrowth, kEnvThreads}) {
    absl::StatusOr<std::optional<uint64_t>> value = readEnvInteger(variable);
    if (!value.ok())
      return value.status();
  }
  return absl::OkStatus();
}

} // namespace sinter
