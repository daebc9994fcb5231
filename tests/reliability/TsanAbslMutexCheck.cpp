// TsanAbslMutexCheck.cpp - checks TsanAbslMutex.cpp under ThreadSanitizer (registered only in
// a -fsanitize=thread build; tools/run-long-tests.sh tsan runs it).
//
// Two threads increment a counter under an absl::Mutex and, when given the argument "race",
// a second counter without it. With TsanAbslMutex.cpp linked in, TSan must report nothing for
// the guarded counter (the run without "race" exits 0) and must still report the unguarded one
// (the run with "race" reports a data race in bumpUnguarded, and none in bumpGuarded). Without the
// shim the guarded counter is reported too, because the system Abseil's Mutex is not instrumented.
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace {
absl::Mutex mu;
long guarded = 0;
long unguarded = 0;

// Not inlined, so that the reports name them.
__attribute__((noinline)) void bumpGuarded() {
  absl::MutexLock lock(&mu);
  ++guarded;
}
__attribute__((noinline)) void bumpUnguarded() { ++unguarded; } // the intended race
} // namespace

int main(int argc, char **argv) {
  const bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  auto work = [race] {
    for (int i = 0; i < 10000; ++i) {
      bumpGuarded();
      if (race)
        bumpUnguarded();
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  absl::MutexLock lock(&mu);
  std::printf("guarded=%ld\n", guarded);
  return guarded == 20000 ? 0 : 1;
}
