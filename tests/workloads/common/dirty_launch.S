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

/* hipError_t wl_hipModuleLaunchKernel_dirty(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra)
 * f=rdi, gx=esi, gy=edx, gz=ecx, bx=r8d, by=r9d, bz=[rsp+8], shmem=[rsp+16] (both 32-bit),
 * stream=[rsp+24], params=[rsp+32], extra=[rsp+40].  Upper halves of the five 32-bit
 * registers and of the two 32-bit stack slots set to 0xdeadbeef. */
    .text
    .globl wl_hipModuleLaunchKernel_dirty
    .type wl_hipModuleLaunchKernel_dirty, @function
wl_hipModuleLaunchKernel_dirty:
    .cfi_startproc
    movabsq $0xdeadbeef00000000, %rax
    movl %esi, %esi
    orq %rax, %rsi
    movl %edx, %edx
    orq %rax, %rdx
    movl %ecx, %ecx
    orq %rax, %rcx
    movl %r8d, %r8d
    orq %rax, %r8
    movl %r9d, %r9d
    orq %rax, %r9
    movl $0xdeadbeef, 12(%rsp)
    movl $0xdeadbeef, 20(%rsp)
    jmp hipModuleLaunchKernel@PLT
    .cfi_endproc
    .size wl_hipModuleLaunchKernel_dirty, .-wl_hipModuleLaunchKernel_dirty

/* hipError_t wl_hipLaunchCooperativeKernel_dirty(f, grid, block, params, unsigned shmem, stream)
 * as hipLaunchKernel, but shmem is 32-bit: the upper half of its stack slot [rsp+8]
 * is set to 0xdeadbeef too. */
    .globl wl_hipLaunchCooperativeKernel_dirty
    .type wl_hipLaunchCooperativeKernel_dirty, @function
wl_hipLaunchCooperativeKernel_dirty:
    .cfi_startproc
    movabsq $0xdeadbeef00000000, %rax
    movl %edx, %edx
    orq %rax, %rdx
    movl %r8d, %r8d
    orq %rax, %r8
    movl $0xdeadbeef, 12(%rsp)
    jmp hipLaunchCooperativeKernel@PLT
    .cfi_endproc
    .size wl_hipLaunchCooperativeKernel_dirty, .-wl_hipLaunchCooperativeKernel_dirty
    .section .note.GNU-stack,"",@progbits
