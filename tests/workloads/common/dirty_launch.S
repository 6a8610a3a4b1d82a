/* hipError_t wl_hipLaunchKernel_dirty(const void *f, dim3 grid, dim3 block,
 *                                     void **args, size_t shmem, hipStream_t stream);
 * SysV x86-64: f=rdi, grid.{x,y}=rsi, grid.z=edx, block.{x,y}=rcx, block.z=r8d,
 * args=r9, shmem=[rsp+8], stream=[rsp+16].  The upper halves of rdx and r8 are
 * undefined by the ABI; we set them to 0xdeadbeef and tail-call hipLaunchKernel
 * (same stack, same return address), so a decoder that does not mask them reports
 * a wrong z. */
    .text
    .globl wl_hipLaunchKernel_dirty
    .type wl_hipLaunchKernel_dirty, @function
wl_hipLaunchKernel_dirty:
    .cfi_startproc
    movabsq $0xdeadbeef00000000, %rax
    movl %edx, %edx
    orq %rax, %rdx
    movl %r8d, %r8d
    orq %rax, %r8
    jmp hipLaunchKernel@PLT
    .cfi_endproc
    .size wl_hipLaunchKernel_dirty, .-wl_hipLaunchKernel_dirty
    .section .note.GNU-stack,"",@progbits
