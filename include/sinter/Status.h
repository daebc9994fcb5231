// Status.h - the two status macros Sinter uses everywhere.
//
// Abseil 20220623 (Debian's) ships absl::Status but no propagation macros, so they are defined
// once here. Every fallible call at the public API and in the runtime returns absl::Status or
// absl::StatusOr<T>; nothing throws.
#ifndef SINTER_STATUS_H
#define SINTER_STATUS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SINTER_STATUS_CONCAT_INNER(a, b) a##b
#define SINTER_STATUS_CONCAT(a, b) SINTER_STATUS_CONCAT_INNER(a, b)

/// Evaluates `expr` (an absl::Status) and returns it from the enclosing function when not ok.
#define SINTER_RETURN_IF_ERROR(expr)                                                               \
  do {                                                                                             \
    ::absl::Status sinter_status_ = (expr);                                                        \
    if (!sinter_status_.ok())                                                                      \
      return sinter_status_;                                                                       \
  } while (0)

#define SINTER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                               \
  auto tmp = (expr);                                                                               \
  if (!tmp.ok())                                                                                   \
    return tmp.status();                                                                           \
  lhs = std::move(tmp).value()

/// Evaluates `expr` (an absl::StatusOr<T>); on error returns its status, else assigns the value
/// to `lhs` (which may be a declaration such as `auto x`).
#define SINTER_ASSIGN_OR_RETURN(lhs, expr)                                                         \
  SINTER_ASSIGN_OR_RETURN_IMPL(SINTER_STATUS_CONCAT(sinter_statusor_, __LINE__), lhs, expr)

#endif // SINTER_STATUS_H
