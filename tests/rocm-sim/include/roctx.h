/* rocm-sim: ROC-TX markers and ranges (API-compatible with ROCm's roctx.h for these functions).
 * Library: libroctx64.so.4 (also libroctx64.so). */
#ifndef ROCM_SIM_ROCTX_H
#define ROCM_SIM_ROCTX_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t roctx_range_id_t;

/* Mark an instantaneous event. */
void roctxMarkA(const char* message);
/* Push a nested range; returns the nesting level it started at (>= 0), or a negative value on error. */
int roctxRangePushA(const char* message);
/* Pop the innermost range of the calling thread; returns the level it ended at, negative if none. */
int roctxRangePop(void);
/* Start a process-wide (not nested) range; returns its id. */
roctx_range_id_t roctxRangeStartA(const char* message);
/* Stop a range started with roctxRangeStartA. */
void roctxRangeStop(roctx_range_id_t id);

#define roctxMark(message) roctxMarkA(message)
#define roctxRangePush(message) roctxRangePushA(message)
#define roctxRangeStart(message) roctxRangeStartA(message)

#ifdef __cplusplus
}
#endif
#endif
