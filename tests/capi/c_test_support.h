/* What the C API's tests share: EXPECT, which prints one line per check
 * and counts the failures in `failures`, read_file (64-byte aligned, NULL
 * when the file cannot be read) and relative_error. C99, header only. */
#ifndef KILN_TESTS_CAPI_C_TEST_SUPPORT_H_
#define KILN_TESTS_CAPI_C_TEST_SUPPORT_H_

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

#define EXPECT(cond, what)                            \
  do {                                                \
    if (cond) {                                       \
      printf("ok    %s\n", what);                     \
    } else {                                          \
      printf("FAIL  %s (line %d)\n", what, __LINE__); \
      ++failures;                                     \
    }                                                 \
  } while (0)

static void* read_file(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  void* data = NULL;
  long size;
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (posix_memalign(&data, 64, (size_t)size + 64) != 0) data = NULL;
  if (data != NULL && fread(data, 1, (size_t)size, f) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *out_size = (size_t)size;
  return data;
}

/* The largest difference relative to the largest expected magnitude. */
static inline double relative_error(const float* got, const float* want, size_t n) {
  double scale = 1e-30, err = 0;
  size_t i;
  for (i = 0; i < n; ++i) scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
  for (i = 0; i < n; ++i) err = fabs(got[i] - want[i]) > err ? fabs(got[i] - want[i]) : err;
  return err / scale;
}

#endif /* KILN_TESTS_CAPI_C_TEST_SUPPORT_H_ */
