#ifndef RTL_API_MIX_CORE_H
#define RTL_API_MIX_CORE_H
#ifdef __cplusplus
extern "C" {
#endif
/* Runs the api_mix sequence: the calling thread makes the prologue
 * (one hipGetDeviceCount), then `threads` threads (logical index 0..threads-1)
 * each run `reps` repetitions of the per-thread sequence described in README.md.
 * Returns 0 (HIP errors are expected and recorded, never fatal). */
int api_mix_run(int threads, int reps);
/* Number of API calls one repetition of the per-thread sequence makes. */
int api_mix_calls_per_rep(void);
#ifdef __cplusplus
}
#endif
#endif
