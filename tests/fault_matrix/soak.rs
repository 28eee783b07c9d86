//! The soak: ten thousand threads (ignored; run by hand).

use super::*;

struct Idle;

impl Tool for Idle {
    fn name(&self) -> &str {
        "idle"
    }
    fn description(&self) -> String {
        "waits an hour".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok("rested".into())
        })
    }
}

/// 10,000 threads, each a parent with 3 live children (idle in a tool, so
/// holding no gate permit); reports peak memory (VmHWM).
/// Run with: `cargo test --release --all-features --test fault_matrix -- --ignored --nocapture`
/// (`SUBAGENTS_SOAK_THREADS=N` to change the count).
#[test]
#[ignore = "soak: 10,000 threads; run by hand"]
fn ten_thousand_threads_soak() {
    let threads: usize = std::env::var("SUBAGENTS_SOAK_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let started = std::time::Instant::now();
        let mut handles = Vec::with_capacity(threads);
        let mut streams = Vec::with_capacity(threads);
        for _ in 0..threads {
            let mut fan_out = Reply::new();
            for c in 0..3 {
                fan_out = fan_out.use_agent(&run_call(&format!("C{c}"), false, &["idle"]));
            }
            let idle = vec![
                Reply::new().tool_call("idle", "{}"),
                Reply::answer("rested"),
            ];
            let model = ScriptedModel::new(vec![fan_out, Reply::answer("started")])
                .with_script("C0\n", idle.clone())
                .with_script("C1\n", idle.clone())
                .with_script("C2\n", idle);
            let (thread, events) = subagents::supervisor::ThreadHandle::spawn(
                DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Idle)),
                None,
            )
            .await
            .unwrap();
            thread.send_user("go").unwrap();
            handles.push(thread);
            streams.push(events);
        }
        let mut live = 0;
        for _ in 0..600 {
            live = 0;
            for h in &handles {
                live += h.hub().snapshot().await.unwrap().live;
            }
            if live == threads * 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let peak = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("VmHWM"))
            .unwrap_or("VmHWM: ?")
            .to_owned();
        eprintln!(
            "{threads} threads, {live} live children after {:?}; peak memory {peak}",
            started.elapsed()
        );
        assert_eq!(live, threads * 3);
        for h in &handles {
            assert_eq!(h.switch_away().await.unwrap(), 3);
            h.close();
        }
    });
}
