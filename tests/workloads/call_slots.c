/* call_slots: the paths of the probes' per-thread call slots (one record per common call,
 * docs/trace-format.md "ApiCall"), with a truth the test derives from the arguments.
 * Built by rtl-user/tests/call_records.rs: with -DCALL_SLOTS_LIB as the probed library
 * (libcallslots.so), without it as the driver.
 *
 * The driver, `call_slots THREADS CALLS NESTS EXITS`:
 *  - main thread: CALLS calls hipSlotCall(a0, 3*a0, a0^5, 11, 12, 13) with a0 = i;
 *  - THREADS threads at once, each CALLS calls with a0 = (t+1)*1000000 + i (more threads than
 *    slots: they collide);
 *  - NESTS calls hipSlotNest(3, tag): it calls itself down to depth 0 (4 calls, nested);
 *  - EXITS threads call hipSlotExit(id), which ends the thread inside the call;
 *  - main thread: 3 more hipSlotCall with a0 = (THREADS+1)*1000000 + i (fewer than a call
 *    slot holds: still held in the slot at the stop);
 *  - one thread calls hipSlotBlock(77) and stays inside it; the driver prints "blocked" and
 *    waits for the test to stop the tracer and kill it.
 * Each hipSlotCall returns a0 % 1000 + 1; hipSlotNest returns depth + 10 * tag. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef CALL_SLOTS_LIB
#define API __attribute__((noinline, visibility("default")))
API int hipSlotCall(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5) {
    __asm__ volatile("" ::: "memory");
    return (int)(a0 % 1000 + 1 + (a1 != 3 * a0) + (a2 != (a0 ^ 5)) + (a3 + a4 + a5 != 36));
}
API int hipSlotNest(uint64_t depth, uint64_t tag) {
    __asm__ volatile("" ::: "memory");
    if (depth > 0)
        hipSlotNest(depth - 1, tag);
    return (int)(depth + 10 * tag);
}
API int hipSlotExit(uint64_t id) {
    (void)id;
    pthread_exit(NULL);
}
API int hipSlotBlock(uint64_t id) {
    (void)id;
    for (;;)
        pause();
}
#else
int hipSlotCall(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
int hipSlotNest(uint64_t, uint64_t);
int hipSlotExit(uint64_t);
int hipSlotBlock(uint64_t);

static long g_calls;

static int calls_n(uint64_t base, long n) {
    for (long i = 0; i < n; i++) {
        uint64_t a0 = base + (uint64_t)i;
        if (hipSlotCall(a0, 3 * a0, a0 ^ 5, 11, 12, 13) != (int)(a0 % 1000 + 1))
            return 1;
    }
    return 0;
}
static int calls(uint64_t base) { return calls_n(base, g_calls); }
static void *worker(void *p) { return (void *)(intptr_t)calls(((uintptr_t)p + 1) * 1000000); }
static void *exiter(void *p) { hipSlotExit((uintptr_t)p); return NULL; }
static void *blocker(void *p) { (void)p; hipSlotBlock(77); return NULL; }

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: call_slots THREADS CALLS NESTS EXITS\n");
        return 2;
    }
    int threads = atoi(argv[1]), nests = atoi(argv[3]), exits = atoi(argv[4]);
    g_calls = atol(argv[2]);
    pthread_t th[1024];
    if (threads > 1024 || calls(0))
        return 1;
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    int bad = 0;
    for (int t = 0; t < threads; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad |= r != NULL;
    }
    for (int k = 0; k < nests; k++)
        bad |= hipSlotNest(3, k) != 3 + 10 * k;
    for (int e = 0; e < exits; e++) {
        pthread_t x;
        pthread_create(&x, NULL, exiter, (void *)(uintptr_t)(100 + e));
        pthread_join(x, NULL);
    }
    bad |= calls_n(((uint64_t)threads + 1) * 1000000, 3);
    if (bad)
        return 1;
    pthread_t b;
    pthread_create(&b, NULL, blocker, NULL);
    usleep(200000); /* the blocker is inside hipSlotBlock long before this */
    printf("blocked\n");
    fflush(stdout);
    for (;;)
        pause();
}
#endif
