/* The probe-cost microbenchmark's target: a shared library exporting one cheap function that
 * starts with `push %rbp` (the instruction uprobes emulate without single-stepping, as every
 * libamdhip64 entry point does). Built by `cargo xtask bench` into target/bench/ with frame
 * pointers; the inner call keeps it a non-leaf so the prologue is always emitted. */
#include <stdint.h>

__attribute__((noinline)) static int mix(uint64_t a, uint64_t b) {
    __asm__ volatile("" ::: "memory");
    return (int)(a ^ b);
}

/* The stack-cost benchmark probes this one under a launch API's name (launch-family APIs are
 * the ones --stacks records). */
__attribute__((noinline, visibility("default"))) int hipLaunchKernel(int *counter, uint64_t a, uint64_t b) {
    *counter += mix(a, b);
    return 0;
}

__attribute__((noinline, visibility("default"))) int hipBenchTarget(int *counter, uint64_t a, uint64_t b) {
    *counter += mix(a, b);
    return 0;
}
