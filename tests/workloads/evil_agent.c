/* A fake agent: any file named librtl_agent*.so that exports rtl_agent_publish is probed by the
 * collector, whoever wrote it. This one does nothing; forge_ops calls it with forged batches. */
void rtl_agent_publish(const void *data, unsigned long len);
void rtl_agent_publish(const void *data, unsigned long len) { __asm__ volatile("" ::"r"(data), "r"(len) : "memory"); }
