/* forge_ops: a hostile process that publishes forged GPU ops through a fake agent.
 *
 *   forge_ops EVIL_SO CLAIM_PID OPS [PER_BATCH]
 *
 * Loads EVIL_SO (a file named librtl_agent_*.so exporting rtl_agent_publish: see
 * evil_agent.c), prints "ready", waits for a line on stdin, then publishes, in the agent's wire
 * format (rtl-common/src/agent.rs, version 2):
 *   1. one batch whose header names CLAIM_PID (another process) carrying PER_BATCH ops of
 *      kernel "victim_kernel": the collector must refuse it (agent_batches_rejected_wrong_pid);
 *   2. batch 0 of its own pid with the strings "hipLaunchKernel" (id 1) and "victim_kernel"
 *      (id 2), then OPS ops of its own (PER_BATCH a batch, default 25: as many as fit in 4096
 *      bytes), each its own API record (unique record_index, CPU times, device 0), none of them
 *      matching a call the probes saw;
 * then prints "done OPS BATCHES" (the ground truth: OPS ops published under its pid, 1 batch
 * claiming another pid) and waits for a line on stdin before exiting.
 * Linked against libamdhip64 (NEEDED, a HIP process, so `attach --pid` accepts it) and calls nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH_MAX 4096
#define OP_LEN 160

typedef void (*publish_fn)(const void *, unsigned long);

struct buf {
    unsigned char b[BATCH_MAX];
    size_t len;
    uint32_t count;
};

static void put(struct buf *w, size_t off, const void *v, size_t n) { memcpy(w->b + off, v, n); }
static void put8(struct buf *w, size_t off, uint8_t v) { put(w, off, &v, 1); }
static void put16(struct buf *w, size_t off, uint16_t v) { put(w, off, &v, 2); }
static void put32(struct buf *w, size_t off, uint32_t v) { put(w, off, &v, 4); }
static void put64(struct buf *w, size_t off, uint64_t v) { put(w, off, &v, 8); }

static void begin(struct buf *w) {
    memset(w->b, 0, sizeof w->b);
    w->len = 32;
    w->count = 0;
}

/* Header: magic "RLAG", version 2, header_len 32, total_len, record_count, pid, flags, batch_seq. */
static void finish(struct buf *w, uint32_t pid, uint64_t seq) {
    memcpy(w->b, "RLAG", 4);
    put16(w, 4, 2);
    put16(w, 6, 32);
    put32(w, 8, (uint32_t)w->len);
    put32(w, 12, w->count);
    put32(w, 16, pid);
    put32(w, 20, 0);
    put64(w, 24, seq);
}

static void string_rec(struct buf *w, uint32_t id, uint8_t kind, const char *s) {
    size_t n = strlen(s), rec = (24 + n + 7) & ~(size_t)7, o = w->len;
    put16(w, o, 2);
    put32(w, o + 4, (uint32_t)rec);
    put32(w, o + 8, id);
    put8(w, o + 12, kind);
    put32(w, o + 16, (uint32_t)n);
    put(w, o + 24, s, n);
    w->len += rec;
    w->count++;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One dispatch of kernel string 2, API string 1, on device 0, queue 0; CLR source with CPU
 * times (HAS_CPU_TIMES | HAS_THREAD_HASH), both clocks CLOCK_MONOTONIC. */
static void op_rec(struct buf *w, uint64_t record) {
    size_t o = w->len;
    uint64_t t = now_ns();
    put16(w, o, 1);
    put32(w, o + 4, OP_LEN);
    put8(w, o + 8, 1);            /* source: CLR */
    put8(w, o + 9, 0);            /* op: dispatch */
    put8(w, o + 11, 4 | 8);       /* flags */
    put8(w, o + 12, 2);           /* cpu_clock: monotonic */
    put8(w, o + 13, 2);           /* gpu_clock: monotonic */
    put32(w, o + 28, 1);          /* api_name_id */
    put64(w, o + 32, 0x5eed5eed5eedull); /* thread_id: a thread the probes never saw */
    put64(w, o + 40, t);          /* cpu_start_ns */
    put64(w, o + 48, t + 1000);   /* cpu_end_ns */
    put64(w, o + 56, t + 2000);   /* gpu_begin_ns */
    put64(w, o + 64, t + 1002000); /* gpu_end_ns: 1 ms of "GPU busy" each */
    put32(w, o + 72, 1024);       /* grid.x */
    put32(w, o + 84, 256);        /* block.x */
    put32(w, o + 128, 2);         /* kernel_name_id */
    put64(w, o + 136, record);    /* record_index */
    put32(w, o + 148, 1);         /* op_count */
    w->len += OP_LEN;
    w->count++;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s EVIL_SO CLAIM_PID OPS [PER_BATCH]\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW);
    publish_fn publish = h ? (publish_fn)dlsym(h, "rtl_agent_publish") : NULL;
    if (!publish) {
        fprintf(stderr, "forge_ops: %s: %s\n", argv[1], dlerror());
        return 1;
    }
    uint32_t claim = (uint32_t)strtoul(argv[2], NULL, 10);
    uint64_t ops = strtoull(argv[3], NULL, 10);
    uint64_t per = argc > 4 ? strtoull(argv[4], NULL, 10) : (BATCH_MAX - 32) / OP_LEN;
    if (per == 0 || per > (BATCH_MAX - 32) / OP_LEN) {
        fprintf(stderr, "forge_ops: PER_BATCH must be 1..%d\n", (BATCH_MAX - 32) / OP_LEN);
        return 2;
    }
    uint32_t self = (uint32_t)getpid();
    char line[64];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        return 1;

    static struct buf w;
    /* 1. Another process's work, as if its agent had sent it. */
    begin(&w);
    for (uint64_t i = 0; i < per; i++)
        op_rec(&w, 1000000000ull + i);
    finish(&w, claim, 5);
    publish(w.b, w.len);

    /* 2. Its own batches. */
    uint64_t seq = 0, sent = 0, batches = 0;
    begin(&w);
    string_rec(&w, 1, 2, "hipLaunchKernel");
    string_rec(&w, 2, 1, "victim_kernel");
    while (sent < ops) {
        while (sent < ops && w.count < per + (seq == 0 ? 2 : 0) && w.len + OP_LEN <= BATCH_MAX) {
            op_rec(&w, sent);
            sent++;
        }
        finish(&w, self, seq++);
        publish(w.b, w.len);
        batches++;
        begin(&w);
    }
    printf("done %llu %llu\n", (unsigned long long)sent, (unsigned long long)batches);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        return 0;
    return 0;
}
