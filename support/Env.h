// Env.h - the numeric SINTER_* environment variables the library reads, parsed one way.
//
// A variable that is set must hold what its row allows: an integer in [min, max], nothing else.
// Anything else is an error naming the variable, never a silent default. createBackend checks
// every variable of the table first (checkLibraryEnvironment), so a reader that cannot return an
// error (a constructor, the process-wide thread pool) only meets a bad value when the factory was
// bypassed; it then keeps its default and says so on stderr.
#ifndef SINTER_SUPPORT_ENV_H
#define SINTER_SUPPORT_ENV_H

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"

namespace sinter {

/// A numeric environment variable and the values it takes.
struct EnvInteger {
  const char *name;
  uint64_t min;
  uint64_t max;
};

/// Flush a trace that reaches this many recorded calls (runtime/LazyBackend.cpp).
inline constexpr EnvInteger kEnvMaxTrace{"SINTER_MAX_TRACE", 1, uint64_t(1) << 32};
/// Calls pending at an add before an overlapped flush; 0 is off.
inline constexpr EnvInteger kEnvOverlap{"SINTER_OVERLAP", 0, uint64_t(1) << 32};
/// Growth of the overlapped pieces of a token.
inline constexpr EnvInteger kEnvOverlapGrowth{"SINTER_OVERLAP_GROWTH", 1, 1 << 16};
/// Worker threads of the shared pool (support/ThreadPool.cpp).
inline constexpr EnvInteger kEnvThreads{"SINTER_THREADS", 1, 1024};

/// The variable's value: nullopt when it is unset or empty; InvalidArgument naming the variable,
/// its text and the range when it is not a decimal integer in [min, max].
absl::StatusOr<std::optional<uint64_t>> readEnvInteger(const EnvInteger &variable);

/// The variable's value, or `fallback` when it is unset or empty, or (with one line on stderr
/// saying why) when it is bad.
uint64_t envIntegerOr(const EnvInteger &variable, uint64_t fallback);

/// Every numeric variable above, checked: the first bad one as InvalidArgument.
absl::Status checkLibraryEnvironment();

} // namespace sinter

#endif // SINTER_SUPPORT_ENV_H
