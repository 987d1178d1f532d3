/* Consumer of an installed fmha through the C entry points (libfmha_c.so): no GPU needed for these calls. */
#include <stdio.h>
#include <string.h>

#include "fmha/c_api.h"

int main(void) {
  char err[256] = {0};
  const char* v = fmha_version();
  /* dtype 7 is invalid: the call returns 1 (invalid argument) with a message naming dtype, before any CUDA call. */
  int rc = fmha_fwd_contiguous(7, 1, 1, 1, 64, 128, 128, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, 0, 0, 0.f, 0,
                               0, NULL, err, (int)sizeof err);
  if (v == NULL || strchr(v, '.') == NULL || rc != 1 || strstr(err, "dtype") == NULL) {
    fprintf(stderr, "consumer_c: version '%s', rc %d, message '%s'\n", v ? v : "(null)", rc, err);
    return 1;
  }
  printf("consumer_c: fmha %s, bad dtype -> %d (%s)\n", v, rc, err);
  return 0;
}
