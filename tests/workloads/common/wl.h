/* Ground-truth writer shared by every workload (see ../README.md, "Truth format").
 *
 * Every record is one JSON object on one line, written with a single write(2)
 * to the file named by $RTL_WORKLOAD_TRUTH, opened O_APPEND, so lines from many
 * threads and processes never interleave.  Without the variable nothing is
 * written (the workloads still run and print their stdout summary). */
#ifndef RTL_WL_H
#define RTL_WL_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WL_REC_MAX 4096

typedef struct {
    char b[WL_REC_MAX];
    int n;
    const char *api; /* counted in the summary when emitted (NULL: not counted) */
    uint64_t count;  /* how many calls this record stands for (1, or N for hot loops) */
} wl_rec;

/* Call once in main() before anything else.  `name` goes into the summary line. */
void wl_init(const char *name);
/* Monotonic clock (CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads), ns. */
uint64_t wl_now_ns(void);
int wl_gettid(void);
/* Logical thread index put into every record of this thread as "thr" (-1: none). */
void wl_set_thread(int idx);
int wl_get_thread(void);
/* Optional process-wide phase label put into every record as "phase" (NULL: none).
 * The string must stay valid. */
void wl_set_phase(const char *phase);

/* A record of one API call: {"pid","tid","seq","api","ret","start_ns","end_ns",...} */
void wl_rec_call(wl_rec *r, const char *api, long long ret, uint64_t t0, uint64_t t1);
/* Same, for a function that returns nothing or whose return is unknown: "ret":null. */
void wl_rec_call_noret(wl_rec *r, const char *api, uint64_t t0, uint64_t t1);
/* A record that is not an API call ("note":what), not counted in the summary. */
void wl_rec_note(wl_rec *r, const char *what);
/* A hot-loop aggregate: {"pid","tid","api","aggregate":true,"calls":n,...} (no "seq");
 * adds n to the summary. */
void wl_rec_count(wl_rec *r, const char *api, uint64_t n);

void wl_rec_u64(wl_rec *r, const char *key, uint64_t v);
void wl_rec_i64(wl_rec *r, const char *key, long long v);
void wl_rec_f64(wl_rec *r, const char *key, double v);
void wl_rec_ptr(wl_rec *r, const char *key, const void *p); /* unsigned integer */
void wl_rec_str(wl_rec *r, const char *key, const char *s); /* JSON-escaped; NULL -> null */
void wl_rec_bool(wl_rec *r, const char *key, int v);
void wl_rec_null(wl_rec *r, const char *key);
void wl_rec_dim3(wl_rec *r, const char *key, unsigned x, unsigned y, unsigned z);
/* Raw JSON value (caller guarantees validity). */
void wl_rec_raw(wl_rec *r, const char *key, const char *json);
void wl_rec_emit(wl_rec *r);

/* Record that `n` calls of `api` were deliberately skipped (e.g. roctx absent). */
void wl_skip_add(const char *api, uint64_t n);
/* Write {"pid":..,"summary":{api:count,...},...} for this process.  Call once,
 * at the end of the process (each forked child calls it for itself). */
void wl_summary(int exit_code);

/* Tiny option parser helpers: "--name value" or "--name=value". */
int wl_opt_int(int argc, char **argv, int *i, const char *name, long long *out);
int wl_opt_str(int argc, char **argv, int *i, const char *name, const char **out);
int wl_opt_flag(int argc, char **argv, int *i, const char *name);
void wl_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif
#endif
