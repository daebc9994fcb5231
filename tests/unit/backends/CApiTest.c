/* CApiTest.c - the C ABI (include/sinter/sinter.h) exercised from C, compiled as C99.
 *
 * Every operation runs once on tiny inputs against values computed here, and every error class
 * of SEMANTICS.md is provoked through the ABI with its code and message checked. Plain C, no test
 * framework: the last line printed is "N passed, M failed" and the exit status is nonzero on any
 * failure.
 */
#define _POSIX_C_SOURCE 200112L /* setenv, unsetenv */

#include "sinter/sinter.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_passed;
static int g_failed;

static void check(int ok, const char *what, int line) {
  if (ok) {
    ++g_passed;
    return;
  }
  ++g_failed;
  fprintf(stderr, "FAIL line %d: %s (last error: \"%s\")\n", line, what, sinter_last_error());
}

static void check_status(sinter_status got, sinter_status want, const char *what, int line) {
  if (got == want) {
    ++g_passed;
    return;
  }
  ++g_failed;
  fprintf(stderr, "FAIL line %d: %s returned %s, expected %s (last error: \"%s\")\n", line, what,
          sinter_status_name(got), sinter_status_name(want), sinter_last_error());
}

#define CHECK(cond) check((cond) != 0, #cond, __LINE__)
#define CHECK_STATUS(expr, want) check_status((expr), (want), #expr, __LINE__)
#define CHECK_OK(expr) CHECK_STATUS(expr, SINTER_OK)
/* The message of the last failure on this thread contains `text`. */
#define CHECK_MESSAGE(text)                                                                        \
  check(strstr(sinter_last_error(), (text)) != NULL, "message has " #text, __LINE__)

static int near(float got, float want) { return fabsf(got - want) <= 1e-5f * (1.0f + fabsf(want)); }

static void check_floats(const float *got, const float *want, size_t n, const char *what,
                         int line) {
  size_t i;
  for (i = 0; i < n; ++i) {
    if (!near(got[i], want[i])) {
      char text[200];
      snprintf(text, sizeof text, "%s[%zu] = %g, expected %g", what, i, got[i], want[i]);
      check(0, text, line);
      return;
    }
  }
  check(1, what, line);
}
#define CHECK_FLOATS(got, want, n) check_floats((got), (want), (n), #got, __LINE__)

/* A new buffer holding the n floats of `values`. */
static sinter_buffer upload(sinter_backend *b, const float *values, size_t n) {
  sinter_buffer h = 0;
  CHECK_OK(sinter_allocate(b, n * sizeof(float), &h));
  CHECK_OK(sinter_copy_to_device(b, (const uint8_t *)values, n * sizeof(float), h));
  return h;
}

static sinter_buffer zeros(sinter_backend *b, size_t n) {
  sinter_buffer h = 0;
  CHECK_OK(sinter_allocate(b, n * sizeof(float), &h));
  return h;
}

static void download(sinter_backend *b, sinter_buffer h, float *out, size_t n) {
  CHECK_OK(sinter_copy_from_device(b, h, (uint8_t *)out, n * sizeof(float)));
}

static void test_versions_and_names(void) {
  CHECK(strcmp(sinter_version(), "0.1.0") == 0);
  CHECK(sinter_abi_version() == SINTER_ABI_VERSION);
  CHECK(strcmp(sinter_status_name(SINTER_OK), "OK") == 0);
  CHECK(strcmp(sinter_status_name(SINTER_NOT_FOUND), "NOT_FOUND") == 0);
  CHECK(strcmp(sinter_status_name(SINTER_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED") == 0);
  CHECK(strcmp(sinter_status_name(SINTER_UNAUTHENTICATED), "UNAUTHENTICATED") == 0);
  CHECK(strcmp(sinter_status_name(-1), "UNRECOGNIZED") == 0);
  CHECK(strcmp(sinter_status_name(17), "UNRECOGNIZED") == 0);
  CHECK(SINTER_NOT_FOUND == 5 && SINTER_OUT_OF_RANGE == 11 && SINTER_INTERNAL == 13);
}

static void test_name_and_device_info(sinter_backend *b) {
  char name[64];
  char tiny[4];
  size_t len = 0;
  uint32_t kind = 99, units = 0;
  uint64_t memory = 0;
  CHECK_OK(sinter_name(b, name, sizeof name, &len));
  CHECK(strcmp(name, "reference") == 0);
  CHECK(len == strlen("reference"));
  /* Truncation is not an error; the length tells the caller. */
  CHECK_OK(sinter_name(b, tiny, sizeof tiny, &len));
  CHECK(strcmp(tiny, "ref") == 0 && len == 9);
  CHECK_OK(sinter_name(b, NULL, 0, &len));
  CHECK(len == 9);

  CHECK_OK(sinter_device_info(b, name, sizeof name, &len, &kind, &memory, &units));
  CHECK(len > 0 && strlen(name) == len);
  CHECK(kind == SINTER_DEVICE_CPU);
  CHECK(memory > 0);
  CHECK(units > 0);
  CHECK_OK(sinter_device_info(b, NULL, 0, NULL, NULL, NULL, NULL));
}

static void test_buffers(sinter_backend *b) {
  const float values[4] = {1.5f, -2.0f, 3.25f, 0.0f};
  float got[4] = {7, 7, 7, 7};
  float zero[4] = {0, 0, 0, 0};
  sinter_buffer h = zeros(b, 4);
  CHECK(h != 0);
  download(b, h, got, 4);
  CHECK_FLOATS(got, zero, 4); /* allocate zero-fills */
  CHECK_OK(sinter_copy_to_device(b, (const uint8_t *)values, sizeof values, h));
  download(b, h, got, 4);
  CHECK_FLOATS(got, values, 4);
  /* Empty host slices are fine, even as NULL. */
  CHECK_OK(sinter_copy_to_device(b, NULL, 0, h));
  CHECK_OK(sinter_copy_from_device(b, h, NULL, 0));
  CHECK_OK(sinter_free(b, h));
}

static void test_matmul(sinter_backend *b) {
  /* A is 2x3, B is 3x2. */
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const float bm[6] = {7, 8, 9, 10, 11, 12};
  const float want[4] = {1 * 7 + 2 * 9 + 3 * 11, 1 * 8 + 2 * 10 + 3 * 12, 4 * 7 + 5 * 9 + 6 * 11,
                         4 * 8 + 5 * 10 + 6 * 12};
  float got[4];
  sinter_buffer ha = upload(b, a, 6), hb = upload(b, bm, 6), out = zeros(b, 4);
  CHECK_OK(sinter_matmul(b, ha, hb, out, 2, 2, 3));
  download(b, out, got, 4);
  CHECK_FLOATS(got, want, 4);
}

static void test_softmax_rms_norm_silu(sinter_backend *b) {
  const float in[4] = {1.0f, 2.0f, 0.5f, -1.0f};
  const float w[4] = {0.5f, 1.0f, 2.0f, -1.0f};
  float want[4], got[4], sum = 0, sq = 0;
  int i;
  sinter_buffer hin = upload(b, in, 4), hw = upload(b, w, 4), out = zeros(b, 4);

  for (i = 0; i < 4; ++i)
    sum += expf(in[i] - 2.0f);
  for (i = 0; i < 4; ++i)
    want[i] = expf(in[i] - 2.0f) / sum;
  CHECK_OK(sinter_softmax(b, hin, out, 4));
  download(b, out, got, 4);
  CHECK_FLOATS(got, want, 4);

  for (i = 0; i < 4; ++i)
    sq += in[i] * in[i];
  for (i = 0; i < 4; ++i)
    want[i] = in[i] * w[i] / sqrtf(sq / 4 + 1e-5f);
  CHECK_OK(sinter_rms_norm(b, hin, hw, out, 4, 1e-5f));
  download(b, out, got, 4);
  CHECK_FLOATS(got, want, 4);

  for (i = 0; i < 4; ++i)
    want[i] = in[i] / (1.0f + expf(-in[i]));
  CHECK_OK(sinter_silu(b, hin, out, 4));
  download(b, out, got, 4);
  CHECK_FLOATS(got, want, 4);
}

static void test_element_mul_add(sinter_backend *b) {
  const float x[3] = {1, -2, 3};
  const float y[3] = {4, 5, -6};
  const float prod[3] = {4, -10, -18};
  const float sum[3] = {5, 3, -3};
  const float twice[3] = {10, 6, -6};
  float got[3];
  sinter_buffer hx = upload(b, x, 3), hy = upload(b, y, 3), out = zeros(b, 3);
  CHECK_OK(sinter_element_mul(b, hx, hy, out, 3));
  download(b, out, got, 3);
  CHECK_FLOATS(got, prod, 3);
  CHECK_OK(sinter_add(b, hx, hy, out, 3));
  download(b, out, got, 3);
  CHECK_FLOATS(got, sum, 3);
  CHECK_OK(sinter_add(b, out, out, out, 3)); /* the output may be an input */
  download(b, out, got, 3);
  CHECK_FLOATS(got, twice, 3);
}

static void test_rope(sinter_backend *b) {
  /* Two q heads and one k head of head_dim 4; the element after the named heads stays. */
  float q[9] = {1, 2, 3, 4, 5, 6, 7, 8, 42};
  float k[5] = {-1, 0.5f, 2, -3, 42};
  float wantq[9], wantk[5], got[9];
  const uint32_t pos = 3, head_dim = 4;
  const float base = 10000.0f;
  int i;
  sinter_buffer hq = upload(b, q, 9), hk = upload(b, k, 5);
  memcpy(wantq, q, sizeof q);
  memcpy(wantk, k, sizeof k);
  for (i = 0; i < 6; ++i) { /* pairs: 4 in q, 2 in k */
    float *v = i < 4 ? &wantq[2 * i] : &wantk[2 * (i - 4)];
    int pair = i % 2; /* index of the pair within its head */
    double angle = pos * pow(base, -2.0 * pair / head_dim);
    float x = v[0], y = v[1];
    v[0] = (float)(x * cos(angle) - y * sin(angle));
    v[1] = (float)(x * sin(angle) + y * cos(angle));
  }
  CHECK_OK(sinter_rope(b, hq, hk, pos, head_dim, base, 2, 1));
  download(b, hq, got, 9);
  CHECK_FLOATS(got, wantq, 9);
  download(b, hk, got, 5);
  CHECK_FLOATS(got, wantk, 5);
}

static void test_copies_and_synchronize(sinter_backend *b) {
  const float src[4] = {1, 2, 3, 4};
  const float first_two[4] = {1, 2, 0, 0};
  const float offset[4] = {1, 2, 3, 2};  /* dst[3] = src[1] */
  const float overlap[4] = {1, 1, 2, 3}; /* memmove of [0,3) to [1,4) in one buffer */
  float got[4];
  sinter_buffer hs = upload(b, src, 4), hd = zeros(b, 4);
  CHECK_OK(sinter_copy_buffer(b, hs, hd, 2 * sizeof(float)));
  download(b, hd, got, 4);
  CHECK_FLOATS(got, first_two, 4);
  CHECK_OK(sinter_copy_buffer(b, hs, hd, sizeof src));
  CHECK_OK(
      sinter_copy_buffer_offset(b, hs, hd, 1 * sizeof(float), 3 * sizeof(float), sizeof(float)));
  download(b, hd, got, 4);
  CHECK_FLOATS(got, offset, 4);
  CHECK_OK(sinter_copy_buffer_offset(b, hs, hs, 0, sizeof(float), 3 * sizeof(float)));
  CHECK_OK(sinter_synchronize(b));
  download(b, hs, got, 4);
  CHECK_FLOATS(got, overlap, 4);
}

static void test_attention(sinter_backend *b) {
  /* head_dim 2, seq_len 3, kv_stride 4 (two KV heads), reading head 1 of q and KV head 1. */
  const float q[4] = {9, 9, 1, 2};
  const float kv[12] = {0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 2, 3};
  const float w[3] = {0.5f, 0.25f, 0.25f};
  float scores[3], got[5];
  float out_want[5] = {-1, -1, 0, 0, -1};
  const float s = 1.0f / sqrtf(2.0f);
  const float scores_want[3] = {1 * s, 2 * s, (2 + 6) * s};
  sinter_buffer hq = upload(b, q, 4), hkv = upload(b, kv, 12), hs = zeros(b, 3);
  sinter_buffer hw = upload(b, w, 3), out;
  CHECK_OK(sinter_attn_score(b, hq, hkv, hs, 2, 3, 2, 2, 4));
  download(b, hs, scores, 3);
  CHECK_FLOATS(scores, scores_want, 3);

  out = upload(b, out_want, 5); /* poisoned with -1 outside [2, 4) */
  out_want[2] = 0.5f * 1 + 0.25f * 0 + 0.25f * 2;
  out_want[3] = 0.5f * 0 + 0.25f * 1 + 0.25f * 3;
  CHECK_OK(sinter_attn_value(b, hw, hkv, out, 2, 3, 2, 4, 2));
  download(b, out, got, 5);
  CHECK_FLOATS(got, out_want, 5);
}

static void test_quantized_matmul(sinter_backend *b) {
  /* Two rows of 32 weights; x[c] = c + 1. */
  float x[32], w[64], got[2], want[2] = {0, 0};
  uint8_t q8[2 * 34], f16[64 * 2];
  int r, c;
  sinter_buffer hx, hw, out = zeros(b, 2);
  for (c = 0; c < 32; ++c)
    x[c] = (float)(c + 1);
  hx = upload(b, x, 32);
  for (r = 0; r < 2; ++r) {
    for (c = 0; c < 32; ++c) {
      int8_t qv = (int8_t)((c * 7 + r * 3) % 11 - 5);
      w[r * 32 + c] = (float)qv;
      want[r] += (float)qv * x[c];
      q8[r * 34 + 2 + c] = (uint8_t)qv;
      /* f16 of 0.5 * qv: exact, encoded by hand from sign, exponent, mantissa. */
      {
        float v = 0.5f * (float)qv;
        uint16_t bits = 0;
        if (v != 0) {
          int e = 0;
          float m = frexpf(fabsf(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
          bits =
              (uint16_t)(((v < 0) << 15) | ((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024));
        }
        f16[(r * 32 + c) * 2] = (uint8_t)(bits & 0xff);
        f16[(r * 32 + c) * 2 + 1] = (uint8_t)(bits >> 8);
      }
    }
    q8[r * 34] = 0x00; /* Q8_0 scale d = 1.0 as f16 0x3C00, little-endian */
    q8[r * 34 + 1] = 0x3C;
  }

  hw = upload(b, w, 64);
  CHECK_OK(sinter_quantized_matmul(b, hw, hx, out, 2, 32, SINTER_DTYPE_F32));
  download(b, out, got, 2);
  CHECK_FLOATS(got, want, 2);

  CHECK_OK(sinter_allocate(b, sizeof q8, &hw));
  CHECK_OK(sinter_copy_to_device(b, q8, sizeof q8, hw));
  CHECK_OK(sinter_quantized_matmul(b, hw, hx, out, 2, 32, SINTER_DTYPE_Q8_0));
  download(b, out, got, 2);
  CHECK_FLOATS(got, want, 2);

  CHECK_OK(sinter_allocate(b, sizeof f16, &hw));
  CHECK_OK(sinter_copy_to_device(b, f16, sizeof f16, hw));
  CHECK_OK(sinter_quantized_matmul(b, hw, hx, out, 2, 32, SINTER_DTYPE_F16));
  download(b, out, got, 2);
  want[0] *= 0.5f;
  want[1] *= 0.5f;
  CHECK_FLOATS(got, want, 2);
}

/* Every error class of SEMANTICS.md through the ABI: the code, the message, and no side effect. */
static void test_errors(sinter_backend *b) {
  const float ones[4] = {1, 1, 1, 1};
  float got[4];
  char id[32];
  uint8_t bytes[64];
  sinter_buffer h = upload(b, ones, 4), out = upload(b, ones, 4), gone = 0;

  /* NOT_FOUND: never allocated, 0, freed, freed twice. */
  CHECK_STATUS(sinter_free(b, UINT64_MAX), SINTER_NOT_FOUND);
  CHECK_MESSAGE("18446744073709551615");
  CHECK_STATUS(sinter_free(b, 0), SINTER_NOT_FOUND);
  CHECK_OK(sinter_allocate(b, 16, &gone));
  CHECK_OK(sinter_free(b, gone));
  snprintf(id, sizeof id, "%llu", (unsigned long long)gone);
  CHECK_STATUS(sinter_free(b, gone), SINTER_NOT_FOUND);
  CHECK_MESSAGE("free");
  CHECK_MESSAGE(id);
  CHECK_MESSAGE("not found");
  CHECK_STATUS(sinter_add(b, gone, h, out, 4), SINTER_NOT_FOUND);
  CHECK_MESSAGE(id);
  CHECK_STATUS(sinter_copy_from_device(b, gone, bytes, 4), SINTER_NOT_FOUND);

  /* OUT_OF_RANGE: the buffers hold 4 floats (16 bytes); a rejected call changes nothing. */
  CHECK_STATUS(sinter_copy_from_device(b, h, bytes, 32), SINTER_OUT_OF_RANGE);
  CHECK_MESSAGE("copy_from_device");
  CHECK_MESSAGE("16");
  CHECK_STATUS(sinter_copy_to_device(b, bytes, 17, h), SINTER_OUT_OF_RANGE);
  CHECK_STATUS(sinter_add(b, h, h, out, 5), SINTER_OUT_OF_RANGE);
  CHECK_MESSAGE("add");
  CHECK_STATUS(sinter_matmul(b, h, h, out, 2, 2, 3), SINTER_OUT_OF_RANGE);
  CHECK_STATUS(sinter_copy_buffer_offset(b, h, out, 8, 0, 12), SINTER_OUT_OF_RANGE);
  CHECK_STATUS(sinter_attn_score(b, h, h, out, 2, 3, 0, 0, 2), SINTER_OUT_OF_RANGE);
  download(b, out, got, 4);
  CHECK_FLOATS(got, ones, 4);

  /* INVALID_ARGUMENT: odd head_dim, ids that are no weight format, partial blocks. */
  CHECK_STATUS(sinter_rope(b, h, out, 0, 3, 10000.0f, 1, 1), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("rope");
  CHECK_MESSAGE("3");
  CHECK_STATUS(sinter_quantized_matmul(b, h, h, out, 1, 4, 4), SINTER_INVALID_ARGUMENT);
  CHECK(strcmp(sinter_last_error(), "quantized_matmul: dtype id 4 is not a GGUF weight format") ==
        0);
  CHECK_STATUS(sinter_quantized_matmul(b, h, h, out, 1, 4, 0xFFFFFFFFu), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("4294967295");
  CHECK_STATUS(sinter_quantized_matmul(b, h, h, out, 1, 4, SINTER_DTYPE_I8),
               SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("I8");
  CHECK_STATUS(sinter_quantized_matmul(b, h, h, out, 1, 4, SINTER_DTYPE_Q8_0),
               SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("32");

  /* UNIMPLEMENTED: a known weight format that comes later. */
  CHECK_STATUS(sinter_quantized_matmul(b, h, h, out, 1, 256, SINTER_DTYPE_Q8_K),
               SINTER_UNIMPLEMENTED);
  CHECK_MESSAGE("Q8_K");
  download(b, out, got, 4);
  CHECK_FLOATS(got, ones, 4);

  /* The message stays until the next failure on this thread, or until cleared. */
  CHECK_OK(sinter_synchronize(b));
  CHECK_MESSAGE("Q8_K");
  {
    char copy[8];
    size_t len = sinter_backend_last_error(b, copy, sizeof copy);
    CHECK(len == strlen(sinter_last_error()));
    CHECK(strncmp(copy, sinter_last_error(), 7) == 0 && copy[7] == '\0');
    CHECK(sinter_backend_last_error(b, NULL, 0) == len);
    CHECK(sinter_backend_last_error(NULL, copy, sizeof copy) == 0);
  }
  sinter_clear_last_error();
  CHECK(strcmp(sinter_last_error(), "") == 0);

  /* NULL pointers are INVALID_ARGUMENT naming the function, never a crash. */
  CHECK_STATUS(sinter_allocate(b, 16, NULL), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("sinter_allocate: out is NULL");
  CHECK_STATUS(sinter_copy_to_device(b, NULL, 4, h), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("sinter_copy_to_device");
  CHECK_STATUS(sinter_copy_from_device(b, h, NULL, 4), SINTER_INVALID_ARGUMENT);
  /* ... and each is the backend's last error too, like any other failure on it. */
  {
    char last[128];
    sinter_backend_last_error(b, last, sizeof last);
    CHECK(strcmp(last, "sinter_copy_from_device: data (with len > 0) is NULL") == 0);
    CHECK_STATUS(sinter_allocate(b, 16, NULL), SINTER_INVALID_ARGUMENT);
    sinter_backend_last_error(b, last, sizeof last);
    CHECK(strcmp(last, "sinter_allocate: out is NULL") == 0);
  }
  CHECK_STATUS(sinter_name(b, NULL, 8, NULL), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_device_info(b, NULL, 8, NULL, NULL, NULL, NULL), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_matmul(NULL, h, h, out, 1, 1, 1), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("sinter_matmul: backend is NULL");
  CHECK_STATUS(sinter_name(NULL, NULL, 0, NULL), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_device_info(NULL, NULL, 0, NULL, NULL, NULL, NULL), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_allocate(NULL, 16, &gone), SINTER_INVALID_ARGUMENT);
  CHECK(gone == 0);
  CHECK_STATUS(sinter_free(NULL, h), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_softmax(NULL, h, out, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_rms_norm(NULL, h, h, out, 4, 1e-5f), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_rope(NULL, h, out, 0, 2, 1.0f, 1, 1), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_silu(NULL, h, out, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_element_mul(NULL, h, h, out, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_add(NULL, h, h, out, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_copy_to_device(NULL, bytes, 4, h), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_copy_from_device(NULL, h, bytes, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_copy_buffer(NULL, h, out, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_copy_buffer_offset(NULL, h, out, 0, 0, 4), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_synchronize(NULL), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_attn_score(NULL, h, h, out, 2, 1, 0, 0, 2), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_attn_value(NULL, h, h, out, 2, 1, 0, 2, 0), SINTER_INVALID_ARGUMENT);
  CHECK_STATUS(sinter_quantized_matmul(NULL, h, h, out, 1, 4, 0), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("sinter_quantized_matmul: backend is NULL");

  /* After all that the backend still works. */
  CHECK_OK(sinter_add(b, h, h, out, 4));
  download(b, out, got, 4);
  CHECK(got[0] == 2.0f && got[3] == 2.0f);
  CHECK_OK(sinter_free(b, h));
  CHECK_OK(sinter_free(b, out));
}

/* Kinds, the environment, options and the memory limit. */
static void test_creation(void) {
  sinter_backend *b = (sinter_backend *)&g_passed; /* must be reset to NULL on failure */
  sinter_buffer h1 = 0, h2 = 0, h3 = 7;
  sinter_status status;
  char name[32];

  CHECK_STATUS(sinter_backend_create("reference", NULL), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("out is NULL");
  CHECK_STATUS(sinter_backend_create("no-such-kind", &b), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("no-such-kind");
  CHECK(b == NULL);

  /* Until the Vulkan backend exists the kind is known but unimplemented. */
  status = sinter_backend_create("vulkan", &b);
  CHECK(status == SINTER_OK || status == SINTER_UNIMPLEMENTED);
  CHECK((status == SINTER_OK) == (b != NULL));
  if (status == SINTER_UNIMPLEMENTED)
    CHECK_MESSAGE("vulkan");
  sinter_backend_destroy(b);

  /* NULL or "" reads SINTER_BACKEND; an explicit kind ignores it. */
  CHECK(setenv("SINTER_BACKEND", "reference", 1) == 0);
  CHECK_OK(sinter_backend_create(NULL, &b));
  CHECK_OK(sinter_name(b, name, sizeof name, NULL));
  CHECK(strcmp(name, "reference") == 0);
  sinter_backend_destroy(b);
  CHECK(setenv("SINTER_BACKEND", "bogus", 1) == 0);
  CHECK_STATUS(sinter_backend_create("", &b), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("SINTER_BACKEND");
  CHECK(b == NULL);
  CHECK_OK(sinter_backend_create("reference", &b));
  sinter_backend_destroy(b);
  CHECK(unsetenv("SINTER_BACKEND") == 0);
  CHECK(setenv("SINTER_DISABLE_FUSION", "no-such-fusion", 1) == 0);
  CHECK_STATUS(sinter_backend_create_ex(NULL, 1, "all", 0, &b), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("SINTER_DISABLE_FUSION");
  CHECK(unsetenv("SINTER_DISABLE_FUSION") == 0);

  /* RESOURCE_EXHAUSTED under a 1 KiB limit; nothing is created, freeing makes room again. */
  CHECK_OK(sinter_backend_create_ex("reference", 0, " rmsnorm-qmatmul , swiglu ", 1024, &b));
  if (!b)
    return;
  CHECK_STATUS(sinter_allocate(b, 2048, &h1), SINTER_RESOURCE_EXHAUSTED);
  CHECK_MESSAGE("2048");
  CHECK(h1 == 0);
  CHECK_OK(sinter_allocate(b, 768, &h1));
  CHECK_STATUS(sinter_allocate(b, 512, &h3), SINTER_RESOURCE_EXHAUSTED);
  CHECK(h3 == 0);
  CHECK_OK(sinter_allocate(b, 256, &h2));
  CHECK_OK(sinter_free(b, h1));
  CHECK_OK(sinter_allocate(b, 512, &h3));
  CHECK(h3 != 0 && h3 != h1 && h3 != h2); /* ids are never reused */
  sinter_backend_destroy(b);              /* frees h2 and h3 with it */
}

/* The device list: the Vulkan devices, then the host CPU; choosing one; the default kind. */
static void test_devices(void) {
  sinter_backend *b = (sinter_backend *)&g_passed; /* must be reset to NULL on failure */
  uint32_t count = 0, position, index = 0, kind = 99, type = 99, units = 0, cpu_index = 0;
  uint64_t memory = 0;
  size_t len = 0;
  char name[256], cpu_name[256], selector[16];

  CHECK_STATUS(sinter_device_count(NULL), SINTER_INVALID_ARGUMENT);
  CHECK_MESSAGE("count is NULL");
  CHECK_OK(sinter_device_count(&count));
  CHECK(count >= 1);
  for (position = 0; position < count; ++position) {
    CHECK_OK(sinter_device_get(position, &index, name, sizeof name, &len, &kind, &type, &memory,
                               &units));
    printf("device %u: %s (kind %u, type %u, %llu bytes, %u compute units)\n", (unsigned)index,
           name, (unsigned)kind, (unsigned)type, (unsigned long long)memory, (unsigned)units);
    CHECK(len == strlen(name) && len > 0);
    if (position + 1 < count) { /* a Vulkan device */
      CHECK(kind == SINTER_DEVICE_VULKAN);
      CHECK(type >= SINTER_DEVICE_TYPE_DISCRETE_GPU && type <= SINTER_DEVICE_TYPE_OTHER);
    } else { /* the host, last */
      CHECK(kind == SINTER_DEVICE_CPU);
      CHECK(type == SINTER_DEVICE_TYPE_CPU);
      CHECK(units >= 1 && memory > 0);
      cpu_index = index;
      strcpy(cpu_name, name);
    }
  }
  /* Only what is asked for: the length alone, every other output NULL. */
  len = 0;
  CHECK_OK(sinter_device_get(count - 1, NULL, NULL, 0, &len, NULL, NULL, NULL, NULL));
  CHECK(len == strlen(cpu_name));
  CHECK_STATUS(sinter_device_get(count, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL),
               SINTER_OUT_OF_RANGE);
  CHECK_MESSAGE("position");
  CHECK_STATUS(sinter_device_get(0, NULL, NULL, 8, NULL, NULL, NULL, NULL, NULL),
               SINTER_INVALID_ARGUMENT);

  /* The CPU by index and by "cpu"; an unknown name is NOT_FOUND listing the devices. */
  snprintf(selector, sizeof selector, "%u", (unsigned)cpu_index);
  CHECK_OK(sinter_backend_create_on_device("reference", selector, 1, NULL, 0, &b));
  CHECK_OK(sinter_name(b, name, sizeof name, NULL));
  CHECK(strcmp(name, "reference") == 0);
  sinter_backend_destroy(b);
  CHECK_OK(sinter_backend_create_on_device("lazy", "CPU", 0, NULL, 0, &b));
  sinter_backend_destroy(b);
  b = (sinter_backend *)&g_passed;
  CHECK_STATUS(sinter_backend_create_on_device("reference", "no-such-device", 1, NULL, 0, &b),
               SINTER_NOT_FOUND);
  CHECK_MESSAGE("no-such-device");
  CHECK_MESSAGE(cpu_name);
  CHECK(b == NULL);
  if (count > 1) { /* the reference does not run on a Vulkan device */
    CHECK_STATUS(sinter_backend_create_on_device("reference", "0", 1, NULL, 0, &b),
                 SINTER_INVALID_ARGUMENT);
    CHECK_MESSAGE("Vulkan device");
  }

  /* No kind and no SINTER_BACKEND is "auto": never the reference. */
  CHECK(unsetenv("SINTER_BACKEND") == 0);
  CHECK_OK(sinter_backend_create(NULL, &b));
  CHECK_OK(sinter_name(b, name, sizeof name, NULL));
  CHECK(strcmp(name, "sinter-cpu") == 0 || strcmp(name, "sinter-vulkan") == 0);
  sinter_backend_destroy(b);
}

int main(void) {
  sinter_backend *b = NULL;
  test_versions_and_names();
  CHECK_OK(sinter_backend_create("reference", &b));
  CHECK(b != NULL);
  if (b) {
    test_name_and_device_info(b);
    test_buffers(b);
    test_matmul(b);
    test_softmax_rms_norm_silu(b);
    test_element_mul_add(b);
    test_rope(b);
    test_copies_and_synchronize(b);
    test_attention(b);
    test_quantized_matmul(b);
    test_errors(b);
  }
  sinter_backend_destroy(b);
  sinter_backend_destroy(NULL);
  test_creation();
  test_devices();
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed != 0;
}
