//! The GPU join on synthetic launch loops (tests/synthetic_gpu): threads issuing calls back to
//! back, 0.5 us apart, the profiler's CPU times jittered by 1.5 us (so time alone cannot tell
//! neighbours apart), checked record by record against the truth. No root, no simulator: the
//! joiner's own API, fed in time order as the collector feeds it.

use crate::synthetic_gpu;

use rtl_user::join::gpu::GpuJoiner;
use rtl_user::join::rows::LinkKind;
use synthetic_gpu::*;

fn join(worlds: &[World]) -> (GpuJoiner, Vec<rtl_user::join::rows::Row>, Feed) {
    let mut next_id = 1;
    let feed = build(worlds, &mut next_id);
    let truth = Feed { events: Vec::new(), truth: feed.truth.clone(), ops: feed.ops };
    let mut j = GpuJoiner::new(OFFSET);
    let rows = run(feed, &mut j, &mut next_id);
    (j, rows, truth)
}

#[test]
fn time_alone_is_ambiguous_here() {
    // The premise of the other tests: with these timings records fit two or more calls, and
    // time alone (even taking each call once) leaves some undecided.
    // Without numbers (an older agent): linked by time alone.
    let w = World { threads: 1, calls_per_thread: 50, numbers: false, ..Default::default() };
    let mut next_id = 1;
    let feed = build(&[w], &mut next_id);
    let mut j = GpuJoiner::new(OFFSET);
    let truth = feed.truth.clone();
    let rows = run(feed, &mut j, &mut next_id);
    let (right, wrong, unlinked, _) = score(&rows, &truth);
    eprintln!("time alone: {right} right, {wrong} wrong, {unlinked} unlinked of {}", right + wrong + unlinked);
    assert_eq!(wrong, 0, "time alone refuses rather than guesses");
    assert!(unlinked > 0, "some records are ambiguous by time");
    assert_eq!(j.stats.ops_ambiguous as usize, unlinked);
}

#[test]
fn back_to_back_threads_link_exactly_by_number() {
    let w = World { threads: 8, calls_per_thread: 300, graph_every: 25, no_op_every: 11, ..Default::default() };
    let (j, rows, feed) = join(&[w]);
    let (right, wrong, unlinked, kinds) = score(&rows, &feed.truth);
    assert_eq!((wrong, unlinked), (0, 0), "{kinds:?} {:?}", j.stats);
    assert_eq!(right, feed.ops);
    assert_eq!(kinds.get(&LinkKind::Correlation), Some(&feed.ops), "the anchor fixes every lane: {kinds:?}");
    assert_eq!(j.stats.ops_linked_correlation as usize, feed.ops);
    assert_eq!(j.stats.sequence.breaks, 0);
}

#[test]
fn without_an_anchor_the_lanes_ends_fix_the_numbering() {
    let w = World { threads: 4, calls_per_thread: 200, anchor: false, no_op_every: 7, ..Default::default() };
    let (j, rows, feed) = join(&[w]);
    let (right, wrong, unlinked, kinds) = score(&rows, &feed.truth);
    assert_eq!((wrong, unlinked), (0, 0), "{kinds:?} {:?}", j.stats);
    assert_eq!(right, feed.ops);
    assert_eq!(kinds.get(&LinkKind::Sequence), Some(&feed.ops), "{kinds:?}");
}

#[test]
fn records_out_of_order_across_batches_and_after_the_threads_exited() {
    for (shuffle, at_end) in [(97, false), (1000, true)] {
        let w = World { threads: 6, calls_per_thread: 250, shuffle, publish_at_end: at_end, graph_every: 40, ..Default::default() };
        let (j, rows, feed) = join(&[w]);
        let (right, wrong, unlinked, kinds) = score(&rows, &feed.truth);
        assert_eq!((wrong, unlinked), (0, 0), "shuffle {shuffle}: {kinds:?} {:?}", j.stats);
        assert_eq!(right, feed.ops);
    }
}

#[test]
fn forked_child_reusing_the_parents_record_ids_and_thread_ids() {
    // Same record indices, same thread hashes (a child's main thread keeps its parent's fs
    // base), overlapping in time: the pid keeps them apart.
    let parent = World { pid: 100, seed: 3, ..Default::default() };
    let child = World { pid: 101, seed: 5, t0: parent.t0 + 40_000, ..Default::default() };
    let (j, rows, feed) = join(&[parent, child]);
    let (right, wrong, unlinked, kinds) = score(&rows, &feed.truth);
    assert_eq!((wrong, unlinked), (0, 0), "{kinds:?} {:?}", j.stats);
    assert_eq!(right, feed.ops);
}

#[test]
fn a_thread_the_probes_never_saw_is_refused_and_counted() {
    let w = World { threads: 3, calls_per_thread: 100, unseen_thread: true, ..Default::default() };
    let (j, rows, feed) = join(&[w]);
    let (right, wrong, unlinked, _) = score(&rows, &feed.truth);
    let unseen = feed.truth.values().filter(|v| v.is_none()).count();
    assert_eq!(wrong, 0);
    assert_eq!(unlinked, unseen, "{:?}", j.stats);
    assert_eq!(j.stats.ops_unlinked_no_thread as usize, unseen);
    assert_eq!(right + unlinked, feed.ops);
    // Each refused record is an API row of its own, from the profiler.
    assert_eq!(j.stats.profiler_only_calls as usize, unseen);
}

#[test]
fn a_lost_call_never_shifts_links() {
    // The probes lost one call of thread 1 (a ring-buffer drop, reported as such): the lane's
    // numbering is found again; nothing is linked to a neighbour.
    let w = World { threads: 3, calls_per_thread: 200, lost_call: Some((1, 80)), ..Default::default() };
    let (j, rows, feed) = join(&[w]);
    let (right, wrong, unlinked, kinds) = score(&rows, &feed.truth);
    assert_eq!(wrong, 0, "{kinds:?} {:?}", j.stats);
    assert!(unlinked >= 1, "the lost call's record has no call");
    assert!(right + unlinked == feed.ops);
    assert!(right as f64 >= 0.95 * feed.ops as f64, "{right} of {}: {kinds:?}", feed.ops);
}
