//! Exact allocation counts, with a counting global allocator
//! (`allocation-counter`: per-thread tallies) in this binary only — the
//! timing binaries keep the system allocator untouched.
//!
//! Prints `key value` lines (`examples/bench_report/` runs this and
//! reads them):
//!
//! - `alloc.<kind>`: allocations per event, emit + read on one thread, for
//!   the raw channel, the hand-wrapped `Child`, and sinks 0, 1, 2 levels
//!   deep (`sink.nested0` is the root sink);
//! - `heap.<kind>`: heap bytes still held per unit after spawning 1,000 of
//!   a kind on a current-thread runtime (so every allocation happens on
//!   this thread and is counted), and `blocks.<kind>`, the allocations
//!   held. Kinds: bare actors, gates, idle agents, parents (parent + hub +
//!   gate) and threads (a parent and 3 children waiting on the model).
//!
//! `cargo bench --bench alloc_count`

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::mem::{MemKind, spawn_many};
use common::sink::{BATCH, Kind, Pipe, event};
use common::{Flavor, runtime};

fn allocations_per_event(kind: Kind, n: usize) -> f64 {
    let mut pipe = Pipe::new(kind);
    // Warm-up: the channel's blocks are recycled after this.
    pipe.same_thread(4);
    let batches = n / BATCH;
    let info = allocation_counter::measure(|| {
        for _ in 0..batches {
            for _ in 0..BATCH {
                pipe.send(event());
            }
            for _ in 0..BATCH {
                drop(pipe.rx.try_recv());
            }
        }
    });
    info.count_total as f64 / (batches * BATCH) as f64
}

fn heap_per_unit(kind: MemKind, n: usize) -> (f64, f64) {
    let rt = runtime(Flavor::Current);
    // Warm-up: lazy statics, the runtime's own structures.
    drop(rt.block_on(spawn_many(kind, 4)));
    let mut kept = None;
    let info = allocation_counter::measure(|| {
        kept = Some(rt.block_on(async {
            let kept = spawn_many(kind, n).await;
            // Let spawned tasks reach their steady state.
            for _ in 0..64 {
                tokio::task::yield_now().await;
            }
            kept
        }));
    });
    drop(kept);
    (
        info.bytes_current as f64 / n as f64,
        info.count_current as f64 / n as f64,
    )
}

fn main() {
    let kinds = [
        ("raw", Kind::Raw),
        ("wrapped", Kind::RawWrapped),
        ("nested0", Kind::Nested(0)),
        ("nested1", Kind::Nested(1)),
        ("nested2", Kind::Nested(2)),
    ];
    for (name, kind) in kinds {
        println!(
            "alloc.{name} {:.3}",
            allocations_per_event(kind, 64 * BATCH)
        );
    }
    for kind in [
        MemKind::BareActors,
        MemKind::Gates,
        MemKind::Agents,
        MemKind::Parents,
        MemKind::Threads,
    ] {
        let (bytes, blocks) = heap_per_unit(kind, 1_000);
        println!("heap.{} {bytes:.0}", kind.name());
        println!("blocks.{} {blocks:.1}", kind.name());
    }
}
