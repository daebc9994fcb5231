/* consumer.c - a C program on the installed C ABI: create a backend, add two vectors, check.
 *
 * Usage: consumer_c [KIND] (default: the environment's SINTER_BACKEND, else "auto": vulkan on a
 * GPU, else cpu). Lists the devices, then prints what it did; exits 0 when the sum and the error
 * path are right, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include <sinter/sinter.h>

static int fail(const char *what, sinter_status status) {
  fprintf(stderr, "consumer_c: %s: %s: %s\n", what, sinter_status_name(status),
          sinter_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *kind = argc > 1 ? argv[1] : NULL;
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  float out[4] = {0, 0, 0, 0};
  sinter_backend *backend = NULL;
  sinter_buffer ha = 0, hb = 0;
  sinter_status s;
  char name[64];
  uint32_t count = 0, position, index, type;
  uint64_t memory;
  int i;

  if (sinter_abi_version() != SINTER_ABI_VERSION) {
    fprintf(stderr, "consumer_c: library ABI %u, header ABI %d\n", (unsigned)sinter_abi_version(),
            SINTER_ABI_VERSION);
    return 1;
  }
  if ((s = sinter_device_count(&count)) != SINTER_OK)
    return fail("sinter_device_count", s);
  for (position = 0; position < count; ++position) {
    if ((s = sinter_device_get(position, &index, name, sizeof name, NULL, NULL, &type, &memory,
                               NULL)) != SINTER_OK)
      return fail("sinter_device_get", s);
    printf("consumer_c: device %u: %s (type %u, %.1f GiB)\n", (unsigned)index, name, (unsigned)type,
           (double)memory / (1024.0 * 1024.0 * 1024.0));
  }
  if ((s = sinter_backend_create(kind, &backend)) != SINTER_OK)
    return fail("sinter_backend_create", s);
  if ((s = sinter_name(backend, name, sizeof name, NULL)) != SINTER_OK)
    return fail("sinter_name", s);
  if ((s = sinter_allocate(backend, sizeof a, &ha)) != SINTER_OK ||
      (s = sinter_allocate(backend, sizeof b, &hb)) != SINTER_OK)
    return fail("sinter_allocate", s);
  if ((s = sinter_copy_to_device(backend, (const uint8_t *)a, sizeof a, ha)) != SINTER_OK ||
      (s = sinter_copy_to_device(backend, (const uint8_t *)b, sizeof b, hb)) != SINTER_OK)
    return fail("sinter_copy_to_device", s);
  if ((s = sinter_add(backend, ha, hb, ha, 4)) != SINTER_OK)
    return fail("sinter_add", s);
  if ((s = sinter_copy_from_device(backend, ha, (uint8_t *)out, sizeof out)) != SINTER_OK)
    return fail("sinter_copy_from_device", s);
  for (i = 0; i < 4; ++i) {
    if (out[i] != a[i] + b[i]) {
      fprintf(stderr, "consumer_c: out[%d] = %g, expected %g\n", i, out[i], a[i] + b[i]);
      return 1;
    }
  }
  /* The error path: a freed buffer is NOT_FOUND, with a message. */
  if ((s = sinter_free(backend, hb)) != SINTER_OK)
    return fail("sinter_free", s);
  s = sinter_free(backend, hb);
  if (s != SINTER_NOT_FOUND || strlen(sinter_last_error()) == 0) {
    fprintf(stderr, "consumer_c: freeing twice gave %s, expected NOT_FOUND\n",
            sinter_status_name(s));
    return 1;
  }
  printf("consumer_c: sinter %s, backend %s: add gave 11 22 33 44; double free: %s (%s)\n",
         sinter_version(), name, sinter_status_name(s), sinter_last_error());
  sinter_backend_destroy(backend);
  return 0;
}
