/* CApiThreadTest.c - the C ABI from several threads at once, compiled as C99 with pthreads.
 *
 * Two properties: sinter_last_error() is per thread (a failure on one thread never shows up in
 * another's message), and one backend shared by several threads computes every thread's results
 * correctly and hands out distinct buffer ids. Prints "N passed, M failed" last.
 */
#define _POSIX_C_SOURCE 200112L /* pthread_barrier_t */

#include "sinter/sinter.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { kThreads = 4, kRounds = 200, kElems = 64 };

/* Each thread counts into its own slot; main adds them up after joining. */
typedef struct {
  int index;
  sinter_backend *backend;
  pthread_barrier_t *barrier;
  int passed;
  int failed;
  sinter_buffer ids[kRounds];
} Worker;

static void check(Worker *w, int ok, const char *what, int line) {
  if (ok) {
    ++w->passed;
    return;
  }
  ++w->failed;
  fprintf(stderr, "FAIL thread %d line %d: %s (last error: \"%s\")\n", w->index, line, what,
          sinter_last_error());
}
#define CHECK(w, cond) check((w), (cond) != 0, #cond, __LINE__)

/* Threads fail in different ways at the same time, then each reads its own message. */
static void *errors_worker(void *arg) {
  Worker *w = (Worker *)arg;
  sinter_buffer h = 0;
  sinter_clear_last_error();
  CHECK(w, sinter_allocate(w->backend, 16, &h) == SINTER_OK);
  pthread_barrier_wait(w->barrier);
  if (w->index % 2 == 0)
    CHECK(w, sinter_free(w->backend, UINT64_MAX - (uint64_t)w->index) == SINTER_NOT_FOUND);
  else
    CHECK(w, sinter_rope(w->backend, h, h, 0, 2 * (uint32_t)w->index + 1, 1.0f, 1, 1) ==
                 SINTER_INVALID_ARGUMENT);
  pthread_barrier_wait(w->barrier); /* every thread has failed now */
  {
    char want[64];
    if (w->index % 2 == 0)
      snprintf(want, sizeof want, "%llu", (unsigned long long)(UINT64_MAX - (uint64_t)w->index));
    else
      snprintf(want, sizeof want, "head_dim %d is odd", 2 * w->index + 1);
    CHECK(w, strstr(sinter_last_error(), want) != NULL);
  }
  CHECK(w, sinter_free(w->backend, h) == SINTER_OK);
  return NULL;
}

/* Every thread runs its own chain of adds on the shared backend and checks the result. */
static void *compute_worker(void *arg) {
  Worker *w = (Worker *)arg;
  float x[kElems], got[kElems];
  sinter_buffer acc = 0, inc = 0;
  int i, r, wrong = 0;
  for (i = 0; i < kElems; ++i)
    x[i] = (float)(w->index + 1);
  CHECK(w, sinter_allocate(w->backend, sizeof x, &acc) == SINTER_OK);
  CHECK(w, sinter_allocate(w->backend, sizeof x, &inc) == SINTER_OK);
  CHECK(w, sinter_copy_to_device(w->backend, (const uint8_t *)x, sizeof x, inc) == SINTER_OK);
  pthread_barrier_wait(w->barrier);
  for (r = 0; r < kRounds; ++r) {
    wrong += sinter_add(w->backend, acc, inc, acc, kElems) != SINTER_OK;
    /* Allocation and release interleave with the other threads' work. */
    wrong += sinter_allocate(w->backend, 4, &w->ids[r]) != SINTER_OK;
    if (r % 2)
      wrong += sinter_free(w->backend, w->ids[r]) != SINTER_OK;
  }
  CHECK(w, wrong == 0);
  CHECK(w, sinter_synchronize(w->backend) == SINTER_OK);
  CHECK(w, sinter_copy_from_device(w->backend, acc, (uint8_t *)got, sizeof got) == SINTER_OK);
  for (i = 0; i < kElems; ++i)
    wrong += got[i] != (float)(kRounds * (w->index + 1));
  CHECK(w, wrong == 0);
  for (r = 0; r < kRounds; r += 2)
    CHECK(w, sinter_free(w->backend, w->ids[r]) == SINTER_OK);
  CHECK(w, sinter_free(w->backend, acc) == SINTER_OK);
  CHECK(w, sinter_free(w->backend, inc) == SINTER_OK);
  return NULL;
}

static int run_workers(Worker *workers, sinter_backend *b, void *(*body)(void *)) {
  pthread_t threads[kThreads];
  pthread_barrier_t barrier;
  int i, ok = 1;
  pthread_barrier_init(&barrier, NULL, kThreads);
  for (i = 0; i < kThreads; ++i) {
    workers[i].index = i;
    workers[i].backend = b;
    workers[i].barrier = &barrier;
    ok &= pthread_create(&threads[i], NULL, body, &workers[i]) == 0;
  }
  for (i = 0; i < kThreads; ++i)
    ok &= pthread_join(threads[i], NULL) == 0;
  pthread_barrier_destroy(&barrier);
  return ok;
}

int main(void) {
  Worker errors[kThreads], compute[kThreads];
  Worker main_checks;
  sinter_backend *b = NULL;
  int passed, failed, i, j, r, s, duplicates = 0;
  memset(errors, 0, sizeof errors);
  memset(compute, 0, sizeof compute);
  memset(&main_checks, 0, sizeof main_checks);
  main_checks.index = -1;

  CHECK(&main_checks, sinter_backend_create("reference", &b) == SINTER_OK);
  if (b) {
    sinter_clear_last_error();
    CHECK(&main_checks, run_workers(errors, b, errors_worker));
    /* None of the workers' failures is this thread's. */
    CHECK(&main_checks, strcmp(sinter_last_error(), "") == 0);

    CHECK(&main_checks, run_workers(compute, b, compute_worker));
    for (i = 0; i < kThreads; ++i)
      for (r = 0; r < kRounds; ++r)
        for (j = i; j < kThreads; ++j)
          for (s = j == i ? r + 1 : 0; s < kRounds; ++s)
            duplicates += compute[i].ids[r] == compute[j].ids[s];
    CHECK(&main_checks, duplicates == 0);
  }
  sinter_backend_destroy(b);

  passed = main_checks.passed;
  failed = main_checks.failed;
  for (i = 0; i < kThreads; ++i) {
    passed += errors[i].passed + compute[i].passed;
    failed += errors[i].failed + compute[i].failed;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
