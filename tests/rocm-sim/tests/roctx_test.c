/* rocm-sim self-test: roctx ranges and markers (links the simulator's libroctx64 and real-header HIP). */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include "roctx.h"

int main(void) {
  roctxMarkA("start");
  int l0 = roctxRangePushA("outer");
  int l1 = roctxRangePushA("inner");
  void* p = NULL;
  hipMalloc(&p, 1024);
  hipMemset(p, 0, 1024);
  int r1 = roctxRangePop();
  roctx_range_id_t id = roctxRangeStartA("process-wide");
  hipDeviceSynchronize();
  roctxRangeStop(id);
  int r0 = roctxRangePop();
  int bad = roctxRangePop();
  hipFree(p);
  int ok = l0 == 0 && l1 == 1 && r1 == 1 && r0 == 0 && bad < 0 && id != 0;
  printf("roctx_test: %s\n", ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
