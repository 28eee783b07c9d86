//! Case 3 under divan: events through `EventSink` — the root sink and one
//! and two nesting levels — against a raw tokio unbounded channel (plain,
//! and with the `Child(id, Box<..>)` wrap done by hand). Divan's
//! allocation profiler counts allocations per event (emit + read).
//!
//! `cargo bench --bench sink`. For the ratios measured side by side, run
//! `cargo run --release --example bench_report`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::sink::{BATCH, Kind, Pipe};
use divan::counter::ItemsCount;
use divan::{AllocProfiler, Bencher};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

const KINDS: [Kind; 5] = [
    Kind::Raw,
    Kind::RawWrapped,
    Kind::Nested(0),
    Kind::Nested(1),
    Kind::Nested(2),
];

/// One batch: `BATCH` events emitted, then read, on this thread.
#[divan::bench(args = KINDS)]
fn emit_and_read(bencher: Bencher, kind: Kind) {
    let mut pipe = Pipe::new(kind);
    pipe.same_thread(4);
    bencher
        .counter(ItemsCount::new(BATCH))
        .bench_local(|| pipe.same_thread(1));
}
