//! Case 1 under divan: one grant/release cycle of a capacity-1 FIFO lock
//! with 100 waiters queued — our `GateHandle`, a `tokio::sync::Mutex`
//! handoff, and a bare ractor gate. FIFO order is asserted every round.
//!
//! `cargo bench --bench gate`. For the ratios measured side by side, run
//! `cargo run --release --example bench_report`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::gate::{self, Bare, Lock, Ours, TokioMutex, WAITERS};
use common::{Flavor, runtime};
use divan::Bencher;
use divan::counter::ItemsCount;

const CYCLES: usize = 10;

fn main() {
    divan::main();
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn mutex(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    bench_with(bencher, flavor, rt, TokioMutex::default());
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn bare_ractor_gate(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    let lock = rt.block_on(Bare::spawn());
    bench_with(bencher, flavor, rt, lock);
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn gate_handle(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    let lock = rt.block_on(Ours::spawn());
    bench_with(bencher, flavor, rt, lock);
}

fn bench_with<L: Lock>(bencher: Bencher, flavor: Flavor, rt: tokio::runtime::Runtime, lock: L) {
    bencher
        .counter(ItemsCount::new(WAITERS * CYCLES))
        .bench_local(|| {
            let round = rt.block_on(gate::round(&lock, CYCLES));
            assert!(round.first_in_order, "FIFO order broken");
            if flavor == Flavor::Current {
                assert!(round.exact_fifo(), "FIFO order broken");
            }
        });
}
