//! The README's first command, `cargo run --example quickstart`, and the
//! chat host example: `cargo test` builds them, and this runs them (each
//! on the scripted model, offline) — before, a change that made either
//! hang or fail still passed CI, which only compiled them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

/// Runs the built example `name` (beside this test's binary), failing if
/// it fails or has not ended within two minutes.
fn run_example(name: &str) -> String {
    let deps = std::env::current_exe().unwrap();
    let exe = deps
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("examples").join(name))
        .unwrap();
    assert!(exe.exists(), "{} was not built", exe.display());
    let child = Command::new(&exe)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("the example {name} did not end within 120 s");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_quickstart_runs_to_its_end() {
    let out = run_example("quickstart");
    assert!(!out.trim().is_empty(), "it printed nothing");
}

/// Exit 0 was all it checked (review: a new user's first hour): the
/// steer thread sent to an `agent_1` of another thread ("no sub-agent
/// with id"), and the chat thread's woken turn failed on a script one
/// reply short — its header's story was not what it printed.
#[test]
fn the_chat_host_runs_to_its_end() {
    let out = run_example("chat_host");
    for told in [
        "The summary arrived after all",
        "going on from agent_5",
        "The titled notes are in.",
        "The wiki is indexed.",
    ] {
        assert!(out.contains(told), "no `{told}`:\n{out}");
    }
    for wrong in ["no reply", "no sub-agent with id", "Failed("] {
        assert!(!out.contains(wrong), "`{wrong}`:\n{out}");
    }
}
