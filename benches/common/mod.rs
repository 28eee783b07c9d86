//! The benchmark cases, shared by the divan benches (`benches/*.rs`) and the
//! side-by-side report (`examples/bench_report/`, which includes this
//! folder with `#[path]`).
//!
//! Every case has *ours* (the runtime's public API) and one or more
//! *floors* (raw tokio, bare ractor) doing the same observable work, so a
//! report can run them interleaved and print ratios.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub(crate) mod capacity;
pub(crate) mod gate;
pub(crate) mod mem;
pub(crate) mod protocol;
pub(crate) mod rpc;
pub(crate) mod sink;
pub(crate) mod spawn;

/// Which tokio scheduler a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// One thread: every cycle's whole CPU work is on the clock, nothing
    /// overlaps (used for instruction counts and the spawn case).
    Current,
    /// Two workers (what `#[tokio::main]` gives on this 2-core machine).
    Multi,
}

/// A tokio runtime of that flavor, with time enabled.
pub(crate) fn runtime(flavor: Flavor) -> tokio::runtime::Runtime {
    let mut builder = match flavor {
        Flavor::Current => tokio::runtime::Builder::new_current_thread(),
        Flavor::Multi => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
    };
    builder.enable_all().build().expect("a tokio runtime")
}
