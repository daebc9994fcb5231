// BufferIds.h - the process-wide source of BufferHandle ids.
//
// SEMANTICS.md promises ids that are never 0 and never reused within a process, whichever
// backend made them; one counter shared by every backend keeps that promise (and makes a handle
// passed to the wrong backend a clean NotFound rather than a silent alias).
#ifndef SINTER_SUPPORT_BUFFERIDS_H
#define SINTER_SUPPORT_BUFFERIDS_H

#include <cstdint>

namespace sinter {

/// A fresh buffer id: 1 for the first call in the process, then strictly increasing. Thread-safe.
uint64_t nextBufferId();

} // namespace sinter

#endif // SINTER_SUPPORT_BUFFERIDS_H
