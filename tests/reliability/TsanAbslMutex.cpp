// TsanAbslMutex.cpp - linked into the ThreadSanitizer build of the concurrency tests
// (tools/run-long-tests.sh tsan; tests/reliability/CMakeLists.txt adds it when CMAKE_CXX_FLAGS
// has -fsanitize=thread).
//
// Debian's Abseil is not built with TSan, so absl::Mutex::Lock/Unlock run uninstrumented code
// (atomics and futexes TSan cannot see) and TSan learns no happens-before edge from them: every
// access that absl::Mutex serialises in Sinter's own (instrumented) code would be reported as a
// race. Abseil's own TSan annotations (absl/base/internal/tsan_mutex_interface.h) are compiled
// out of the library. This file puts them back: it defines the absl::Mutex members that Sinter
// calls in the test executable itself, which the linker then prefers to the shared library's,
// and each one forwards to the library's definition (dlsym(RTLD_NEXT)) between the same
// __tsan_mutex_* calls that an instrumented Abseil makes. TSan then sees absl::Mutex as a mutex:
// it derives happens-before from it and checks lock order over it, and real races stay reported.
// Only the plain locking calls are covered (Sinter uses absl::MutexLock and no Condition/CondVar);
// a test that used the others would get false reports, not silently missed ones.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"

namespace {

// The shared library's definition of the member whose mangled name is `symbol`.
template <typename Fn> Fn realMember(const char *symbol) {
  void *fn = dlsym(RTLD_NEXT, symbol);
  if (!fn) {
    std::fprintf(stderr, "TsanAbslMutex: %s not found in the loaded Abseil\n", symbol);
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

#define SINTER_ABSL_NS_STR2(x) #x
#define SINTER_ABSL_NS_STR(x) SINTER_ABSL_NS_STR2(x)
#if defined(ABSL_OPTION_USE_INLINE_NAMESPACE) && ABSL_OPTION_USE_INLINE_NAMESPACE
// The length of the inline namespace's name (7 for "debian3").
constexpr size_t nsLength = sizeof(SINTER_ABSL_NS_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME)) - 1;
#endif

// The mangled name of absl::[<inline namespace>::]Mutex::<member>.
std::string mangled(const char *member) {
  std::string s = "_ZN4absl";
#if defined(ABSL_OPTION_USE_INLINE_NAMESPACE) && ABSL_OPTION_USE_INLINE_NAMESPACE
  s += std::to_string(nsLength);
  s += SINTER_ABSL_NS_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
#endif
  s += "5Mutex";
  s += member;
  return s;
}

using VoidFn = void (*)(absl::Mutex *);
using BoolFn = bool (*)(absl::Mutex *);

} // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

Mutex::~Mutex() {
  static const VoidFn real = realMember<VoidFn>(mangled("D2Ev").c_str());
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
  real(this);
}

void Mutex::Lock() {
  static const VoidFn real = realMember<VoidFn>(mangled("4LockEv").c_str());
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::TryLock() {
  static const BoolFn real = realMember<BoolFn>(mangled("7TryLockEv").c_str());
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  bool locked = real(this);
  __tsan_mutex_post_lock(this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return locked;
}

void Mutex::Unlock() {
  static const VoidFn real = realMember<VoidFn>(mangled("6UnlockEv").c_str());
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderLock() {
  static const VoidFn real = realMember<VoidFn>(mangled("10ReaderLockEv").c_str());
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::ReaderTryLock() {
  static const BoolFn real = realMember<BoolFn>(mangled("13ReaderTryLockEv").c_str());
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock | __tsan_mutex_try_lock);
  bool locked = real(this);
  __tsan_mutex_post_lock(
      this,
      __tsan_mutex_read_lock | (locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::ReaderUnlock() {
  static const VoidFn real = realMember<VoidFn>(mangled("12ReaderUnlockEv").c_str());
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

ABSL_NAMESPACE_END
} // namespace absl
