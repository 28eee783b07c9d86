//! Single-case mode (`--case NAME --ops N`, what callgrind runs) and the
//! instructions-per-op table built from it.

use super::*;

/// Cases for `--case`, with the op counts callgrind runs them at.
pub(super) const CASES: [(&str, usize, usize); 13] = [
    ("gate-mutex", 1_000, 3_000),
    ("gate-bare", 1_000, 3_000),
    ("gate-ours", 1_000, 3_000),
    ("spawn-bare", 100, 300),
    ("spawn-agent", 100, 300),
    ("spawn-hub", 100, 300),
    ("spawn-protocol", 100, 300),
    ("sink-raw", 16 * BATCH, 48 * BATCH),
    ("sink-wrapped", 16 * BATCH, 48 * BATCH),
    ("sink-root", 16 * BATCH, 48 * BATCH),
    ("sink-nested1", 16 * BATCH, 48 * BATCH),
    ("call-mpsc", 2_000, 6_000),
    ("call-ractor", 2_000, 6_000),
];

pub(super) fn run_case(name: &str, ops: usize) {
    let rt = runtime(Flavor::Current);
    rt.block_on(async {
        match name {
            "gate-mutex" => run_gate(&TokioMutex::default(), ops).await,
            "gate-bare" => run_gate(&Bare::spawn().await, ops).await,
            "gate-ours" => run_gate(&Ours::spawn().await, ops).await,
            "spawn-bare" => {
                let mut c = BareCase::new().await;
                c.run(ops).await;
            }
            "spawn-agent" => {
                let mut c = AgentCase::new().await;
                c.run(ops).await;
            }
            "spawn-hub" => {
                let mut c = HubCase::new().await;
                c.run(ops).await;
            }
            "spawn-protocol" => {
                let mut c = ProtocolCase::new().await;
                c.run(ops).await;
            }
            "sink-raw" => drop(Pipe::new(Kind::Raw).same_thread(ops / BATCH)),
            "sink-wrapped" => drop(Pipe::new(Kind::RawWrapped).same_thread(ops / BATCH)),
            "sink-root" => drop(Pipe::new(Kind::Nested(0)).same_thread(ops / BATCH)),
            "sink-nested1" => drop(Pipe::new(Kind::Nested(1)).same_thread(ops / BATCH)),
            "call-mpsc" => rpc::mpsc_calls(ops).await,
            "call-ractor" => rpc::ractor_calls(ops).await,
            other => panic!("unknown case {other}"),
        }
    });
}

pub(super) async fn run_gate<L: Lock>(lock: &L, ops: usize) {
    let round = gate::round(lock, ops / WAITERS).await;
    assert!(round.exact_fifo(), "FIFO order broken");
}

/// Instructions per op of each case: callgrind at two op counts, the
/// difference divided by the difference of ops (set-up cancels out).
pub(super) fn callgrind_table() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let probe = Command::new("valgrind").arg("--version").output().ok()?;
    if !probe.status.success() {
        return None;
    }
    let count = |case: &str, ops: usize| -> f64 {
        let out = Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                "--dump-instr=no",
            ])
            .arg(&exe)
            .args(["--case", case, "--ops", &ops.to_string()])
            .output()
            .expect("run valgrind");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "callgrind {case} failed: {text}");
        text.lines()
            .find_map(|l| l.split("Collected :").nth(1))
            .and_then(|n| n.trim().parse::<f64>().ok())
            .expect("callgrind's Collected line")
    };
    let mut per_op = std::collections::HashMap::new();
    for (case, lo, hi) in CASES {
        let i = (count(case, hi) - count(case, lo)) / (hi - lo) as f64;
        eprintln!("callgrind {case}: {i:.0} instructions/op");
        per_op.insert(case, i);
    }
    let k = |c: &str| per_op[c];
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| case (current-thread runtime) | ours instr/op | floor instr/op | ratio |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|");
    let mut line = |case: &str, ours: f64, floor_name: &str, floor: f64| {
        let _ = writeln!(
            t,
            "| {case} | {ours:.0} | {floor_name} {floor:.0} | {:.2}× |",
            ours / floor
        );
    };
    line(
        "1. gate cycle, 100 waiters",
        k("gate-ours"),
        "Mutex",
        k("gate-mutex"),
    );
    line(
        "1. gate cycle, 100 waiters",
        k("gate-ours"),
        "bare ractor gate",
        k("gate-bare"),
    );
    line(
        "1. bare gate (floor) vs Mutex",
        k("gate-bare"),
        "Mutex",
        k("gate-mutex"),
    );
    line(
        "2. spawn → event → stop, Hub",
        k("spawn-hub"),
        "bare",
        k("spawn-bare"),
    );
    line(
        "2. spawn → event → stop, Hub",
        k("spawn-hub"),
        "its protocol in bare ractor",
        k("spawn-protocol"),
    );
    line(
        "2. the protocol in bare ractor (floor)",
        k("spawn-protocol"),
        "bare",
        k("spawn-bare"),
    );
    line(
        "2. spawn → event → stop, agent layer",
        k("spawn-agent"),
        "bare",
        k("spawn-bare"),
    );
    line(
        "3. event, 1 nesting level",
        k("sink-nested1"),
        "raw channel",
        k("sink-raw"),
    );
    line(
        "3. event, 1 nesting level",
        k("sink-nested1"),
        "hand-wrapped",
        k("sink-wrapped"),
    );
    line(
        "3. event, root sink",
        k("sink-root"),
        "raw channel",
        k("sink-raw"),
    );
    line(
        "ref. call! vs mpsc+oneshot",
        k("call-ractor"),
        "mpsc+oneshot",
        k("call-mpsc"),
    );
    Some(t)
}
