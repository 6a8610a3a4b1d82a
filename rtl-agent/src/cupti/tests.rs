#[test]
fn only_calls_that_put_work_on_the_gpu_keep_api_records() {
    for n in [
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuGraphLaunch",
        "cuMemcpyHtoDAsync_v2",
        "cuMemsetD32Async",
        "cudaLaunchKernel_v7000",
        "cudaGraphLaunch_v10000",
        "cudaMemcpyAsync_v3020",
        "cudaMemsetAsync_ptsz_v7000",
    ] {
        assert!(is_gpu_work_api(n.as_bytes()), "{n}");
    }
    for n in [
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cudaGetDevice_v3020",
        "cuMemAlloc_v2",
        "cudaStreamGetCaptureInfo",
        "cuGraphInstantiate",
    ] {
        assert!(!is_gpu_work_api(n.as_bytes()), "{n}");
    }
}

use super::*;
use std::mem::offset_of;

/// Offsets from the CUDA 13.0 header (gcc offsetof on cupti_activity.h, CUPTI_API_VERSION 130001).
#[test]
fn layouts_match_the_13_0_header() {
    assert_eq!(offset_of!(Kernel10, start), 16);
    assert_eq!(offset_of!(Kernel10, end), 24);
    assert_eq!(offset_of!(Kernel10, device_id), 40);
    assert_eq!(offset_of!(Kernel10, stream_id), 48);
    assert_eq!(offset_of!(Kernel10, grid), 52);
    assert_eq!(offset_of!(Kernel10, block), 64);
    assert_eq!(offset_of!(Kernel10, correlation_id), 92);
    assert_eq!(offset_of!(Kernel10, grid_id), 96);
    assert_eq!(offset_of!(Kernel10, name), 104);
    assert_eq!(offset_of!(Kernel10, queued), 120);
    assert_eq!(offset_of!(Kernel10, launch_type), 136);
    assert_eq!(offset_of!(Kernel10, graph_node_id), 144);
    assert_eq!(offset_of!(Kernel10, shmem_limit_config), 152);
    assert_eq!(offset_of!(Kernel10, graph_id), 156);
    assert_eq!(offset_of!(Kernel10, p_access_policy_window), 160);
    assert_eq!(offset_of!(Kernel10, channel_id), 168);
    assert_eq!(offset_of!(Kernel10, local_memory_total_v2), 192);
    assert_eq!(offset_of!(Kernel10, is_device_launched), 208);
    assert_eq!(size_of::<Kernel10>(), 216);
    assert_eq!(offset_of!(Memcpy6, copy_kind), 4);
    assert_eq!(offset_of!(Memcpy6, bytes), 8);
    assert_eq!(offset_of!(Memcpy6, start), 16);
    assert_eq!(offset_of!(Memcpy6, device_id), 32);
    assert_eq!(offset_of!(Memcpy6, stream_id), 40);
    assert_eq!(offset_of!(Memcpy6, correlation_id), 44);
    assert_eq!(offset_of!(Memcpy6, runtime_correlation_id), 48);
    assert_eq!(offset_of!(Memcpy6, reserved0), 56);
    assert_eq!(offset_of!(Memcpy6, graph_node_id), 64);
    assert_eq!(offset_of!(Memcpy6, graph_id), 72);
    assert_eq!(offset_of!(Memcpy6, channel_type), 80);
    assert_eq!(offset_of!(Memcpy6, is_device_launched), 84);
    assert_eq!(offset_of!(Memcpy6, copy_count), 88);
    assert_eq!(size_of::<Memcpy6>(), 96);
    assert_eq!(offset_of!(Memset4, value), 4);
    assert_eq!(offset_of!(Memset4, bytes), 8);
    assert_eq!(offset_of!(Memset4, start), 16);
    assert_eq!(offset_of!(Memset4, device_id), 32);
    assert_eq!(offset_of!(Memset4, stream_id), 40);
    assert_eq!(offset_of!(Memset4, correlation_id), 44);
    assert_eq!(offset_of!(Memset4, flags), 48);
    assert_eq!(offset_of!(Memset4, memory_kind), 50);
    assert_eq!(offset_of!(Memset4, graph_node_id), 64);
    assert_eq!(offset_of!(Memset4, graph_id), 72);
    assert_eq!(offset_of!(Memset4, is_device_launched), 84);
    assert_eq!(size_of::<Memset4>(), 88);
    assert_eq!(offset_of!(ApiRecord, cbid), 4);
    assert_eq!(offset_of!(ApiRecord, start), 8);
    assert_eq!(offset_of!(ApiRecord, process_id), 24);
    assert_eq!(offset_of!(ApiRecord, thread_id), 28);
    assert_eq!(offset_of!(ApiRecord, correlation_id), 32);
    assert_eq!(offset_of!(ApiRecord, return_value), 36);
    assert_eq!(size_of::<ApiRecord>(), 40);
}

fn api_bytes(kind: u32, cbid: u32, corr: u32, start: u64, end: u64, tid: u32) -> Vec<u8> {
    let r = ApiRecord { kind, cbid, start, end, process_id: 7, thread_id: tid, correlation_id: corr, return_value: 0 };
    // SAFETY: plain repr(C) struct without padding.
    unsafe { std::slice::from_raw_parts(&r as *const ApiRecord as *const u8, size_of::<ApiRecord>()) }.to_vec()
}

fn kernel_bytes(corr: u32, start: u64, end: u64, graph: u32) -> Vec<u8> {
    let mut b = vec![0u8; 216];
    b[0..4].copy_from_slice(&KIND_CONCURRENT_KERNEL.to_le_bytes());
    b[16..24].copy_from_slice(&start.to_le_bytes());
    b[24..32].copy_from_slice(&end.to_le_bytes());
    b[52..56].copy_from_slice(&4i32.to_le_bytes());
    b[64..68].copy_from_slice(&128i32.to_le_bytes());
    b[92..96].copy_from_slice(&corr.to_le_bytes());
    b[156..160].copy_from_slice(&graph.to_le_bytes());
    b
}

#[test]
fn correlates_in_either_order_and_graph_nodes_share_the_call() {
    let s = crate::publish::Strings::new(64, 4096);
    let mut frames = vec![DumpFrame::ApiName { domain: DOMAIN_DRIVER, cbid: 307, name: b"cuLaunchKernel".to_vec() }];
    // Kernel before its API record (different buffers), then the API record.
    frames.push(DumpFrame::Record { rec: kernel_bytes(10, 500, 600, 0), name: b"_Z1kv".to_vec() });
    frames.push(DumpFrame::BufferEnd);
    frames.push(DumpFrame::Record { rec: api_bytes(KIND_DRIVER, 307, 10, 100, 200, 42), name: vec![] });
    frames.push(DumpFrame::BufferEnd);
    // A graph launch: one API record, three kernels.
    frames.push(DumpFrame::ApiName { domain: DOMAIN_DRIVER, cbid: 514, name: b"cuGraphLaunch".to_vec() });
    frames.push(DumpFrame::Record { rec: api_bytes(KIND_DRIVER, 514, 11, 300, 400, 43), name: vec![] });
    for i in 0..3 {
        let mut rec = kernel_bytes(11, 700 + i, 750 + i, 5);
        rec[144..152].copy_from_slice(&(1000 + i).to_le_bytes()); // graphNodeId
        frames.push(DumpFrame::Record { rec, name: b"_Z1gv".to_vec() });
    }
    // A kernel whose API record never comes.
    frames.push(DumpFrame::Record { rec: kernel_bytes(99, 900, 950, 0), name: b"_Z1kv".to_vec() });
    // A truncated record.
    frames.push(DumpFrame::Record { rec: kernel_bytes(12, 1, 2, 0)[..100].to_vec(), name: vec![] });
    let mut dump = Vec::new();
    for f in &frames {
        encode_frame(&mut dump, f);
    }
    let back = read_dump(&dump).unwrap();
    assert_eq!(back, frames);
    assert!(read_dump(&dump[..dump.len() - 3]).is_err());
    let (ops, st) = replay(&back, &s);
    assert_eq!(ops.len(), 5);
    assert_eq!(st.linked, 4);
    assert_eq!(st.without_api, 1);
    assert_eq!(st.short_records, 1);
    let first = ops.iter().find(|o| o.record_index == 10).unwrap();
    assert_eq!((first.cpu_start_ns, first.cpu_end_ns, first.tid), (100, 200, 42));
    assert_eq!((first.gpu_begin_ns, first.gpu_end_ns, first.grid[0], first.block[0]), (500, 600, 4, 128));
    assert_eq!(s.get(first.api_name_id).unwrap().2, b"cuLaunchKernel");
    assert_eq!(s.get(first.kernel_name_id).unwrap().2, b"_Z1kv");
    let graph: Vec<_> = ops.iter().filter(|o| o.record_index == 11).collect();
    assert_eq!(graph.len(), 3);
    assert!(graph.iter().all(|o| o.flags & wire::OP_IS_GRAPH != 0 && o.tid == 43 && o.cpu_start_ns == 300));
    // Each node named by CUPTI's id (the collector ranks them), not all as node 0.
    assert!(graph.iter().all(|o| o.flags & wire::OP_NODE_IS_ID != 0));
    let mut ids: Vec<u32> = graph.iter().map(|o| o.op_index).collect();
    ids.sort();
    assert_eq!(ids, vec![1000, 1001, 1002]);
    assert_eq!(ops.iter().find(|o| o.record_index == 10).unwrap().flags & wire::OP_NODE_IS_ID, 0);
    let lost = ops.iter().find(|o| o.record_index == 99).unwrap();
    assert_eq!(lost.flags & wire::OP_HAS_CPU_TIMES, 0);
}

#[test]
fn candidate_order() {
    let c = candidates(
        Some("/x/libcupti.so.13"),
        &[],
        &["/v/site-packages/nvidia/cu13/lib/libcudart.so.13".into(), "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into()],
    );
    assert_eq!(c[0], "/x/libcupti.so.13");
    assert_eq!(c[1], "/v/site-packages/nvidia/cu13/lib/libcupti.so.13");
    assert_eq!(c.last().unwrap(), "libcupti.so");
    let c = candidates(None, &["/a/libcupti.so.13".into()], &[]);
    assert_eq!(c[0], "/a/libcupti.so.13", "a copy already loaded (torch's kineto) comes first");
}
