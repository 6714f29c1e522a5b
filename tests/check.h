// tests/check.h — the PASS/FAIL lines the test binaries print and the
// runners count: "PASS name: detail" or "FAIL name: detail".
#include <stdarg.h>
#include <stdio.h>

int n_pass, n_fail;

void check(int ok, const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s %s: ", ok ? "PASS" : "FAIL", name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) n_pass++;
    else n_fail++;
}
