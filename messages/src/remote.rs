//! A child run on another node: what the parent's node asks
//! ([`RunSpec`], [`RunRequest`]) and what the child's node reports back
//! ([`RunReport`]), numbered so the parent applies them once and in order.
//! All of it crosses the wire as bincode (see [`crate::codec`]); the
//! transport (ractor_cluster, or a loopback in tests) carries opaque bytes
//! and decodes them into a `Result`, never a panic.

use serde::{Deserialize, Serialize};

use crate::event::{AgentEvent, AgentResult, ApprovalDecision};
use crate::ids::{AgentId, ApprovalId};
use crate::limits::Limits;
use crate::model::{ChatMessage, RequestOptions};

/// One run of a child, as the node that runs it needs it: everything the
/// hub decided (limits, tools, model), nothing that only lives in the
/// parent's process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// The parent's node's number for this run, unique among the runs it
    /// starts: its reports carry it.
    pub key: u64,
    /// The child's id (its events and approval ids carry it).
    pub id: AgentId,
    /// Its system prompt (the hub's instructions appended).
    pub system_prompt: String,
    /// Its task, or a resumed run's message.
    pub input: String,
    /// Messages sent to it before it started, read after `input`.
    pub followups: Vec<String>,
    /// The conversation a resumed run goes on from (empty for a new run).
    pub conversation: Vec<ChatMessage>,
    /// The model, by name, resolved in the node's own registry.
    pub model: String,
    /// The tools it may call, by name, from the node's own registry.
    pub tools: Vec<String>,
    /// Its limits.
    pub limits: Limits,
    /// Its depth (1 for a parent's child).
    pub depth: u32,
    /// Options for each of its model calls.
    pub options: RequestOptions,
    /// When the parent's node is lost: `true`, the run goes on to its end
    /// and its result is kept on its node for fetching (the parent's
    /// `Detach` policy, for the parent's own child); `false`, it is
    /// stopped (`Cascade`, or a grandchild under either).
    pub keep_if_orphaned: bool,
    /// The number its approvals follow: its thread's block, as a local
    /// child's (numbered from 1 on its node, a request's id came back in
    /// a later session, and a host's kept row answered it).
    pub approvals_after: u64,
}

/// What the parent's node asks of a running child.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunRequest {
    /// Stop its turn (it ends `stopped`, its open calls answered).
    Stop,
    /// A message for its running turn (`use_agent send`), numbered so the
    /// answer ([`ReportBody::Steered`]) finds its asker.
    Steer {
        /// The asker's number for it.
        n: u64,
        /// The message.
        text: String,
    },
    /// The host's answer to one of its approvals.
    Approve {
        /// The approval.
        id: ApprovalId,
        /// The answer.
        decision: ApprovalDecision,
    },
}

/// One report of a child's node about a run, numbered from 0 per run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run ([`RunSpec::key`]).
    pub key: u64,
    /// Its place in the run's reports (0, 1, 2, …).
    pub seq: u64,
    /// What it says.
    pub body: ReportBody,
}

/// What a [`RunReport`] says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportBody {
    /// An event of the child's turn, as its agent emitted it.
    Event(AgentEvent),
    /// The answer to a [`RunRequest::Steer`]: taken by the running turn,
    /// or not (it had finished).
    Steered {
        /// The asker's number for it.
        n: u64,
        /// Taken.
        taken: bool,
    },
    /// The run ended: its result (also sent before as its `Result`
    /// event) and its whole conversation (what a resumed run goes on
    /// from). The last report of a run.
    Ended {
        /// The turn's result.
        result: AgentResult,
        /// Its conversation.
        conversation: Vec<ChatMessage>,
    },
    /// The node could not start the run (an unknown model or tool), or
    /// — midway — a report of it could not be sent or read (too large,
    /// unreadable): the last report of a run.
    Refused(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Wire;
    use crate::event::Outcome;
    use crate::model::Usage;

    fn spec() -> RunSpec {
        RunSpec {
            key: 12,
            id: AgentId::new("agent_3"),
            system_prompt: "Worker\nYou work.".into(),
            input: "work".into(),
            followups: vec!["also this".into()],
            conversation: vec![ChatMessage::user("earlier")],
            model: "qwen".into(),
            tools: vec!["sleep".into()],
            limits: Limits::default(),
            depth: 1,
            options: RequestOptions::default(),
            keep_if_orphaned: true,
            approvals_after: 1_000_000,
        }
    }

    #[test]
    fn every_remote_type_round_trips_on_the_wire() {
        let spec = spec();
        assert_eq!(RunSpec::from_wire(&spec.to_wire().unwrap()).unwrap(), spec);
        for request in [
            RunRequest::Stop,
            RunRequest::Steer {
                n: 7,
                text: "hurry".into(),
            },
            RunRequest::Approve {
                id: ApprovalId::new("agent_3-approval-1"),
                decision: ApprovalDecision::Deny,
            },
        ] {
            assert_eq!(
                RunRequest::from_wire(&request.to_wire().unwrap()).unwrap(),
                request
            );
        }
        let result = AgentResult {
            text: "done".into(),
            outcome: Outcome::Completed,
            model_calls: 2,
            tool_calls: 1,
            usage: Usage::default(),
            children_usage: Usage::default(),
            elapsed: std::time::Duration::from_millis(1500),
        };
        for body in [
            ReportBody::Event(AgentEvent::Text("hi".into())),
            ReportBody::Steered { n: 1, taken: true },
            ReportBody::Ended {
                result,
                conversation: vec![ChatMessage::assistant("done", Vec::new())],
            },
            ReportBody::Refused("no model `x` here".into()),
        ] {
            let report = RunReport {
                key: 12,
                seq: 4,
                body,
            };
            assert_eq!(
                RunReport::from_wire(&report.to_wire().unwrap()).unwrap(),
                report
            );
        }
    }

    #[test]
    fn bad_bytes_are_an_error_not_a_panic() {
        let bytes = spec().to_wire().unwrap();
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(RunSpec::from_wire(&bytes[..cut]).is_err());
        }
        assert!(RunReport::from_wire(&[0xff; 64]).is_err());
        assert!(RunRequest::from_wire(&[9, 9, 9]).is_err());
    }

    /// Foreign bytes: `Child` holds an event, so a report can nest them —
    /// two bytes a level, each claiming almost nothing against the decode
    /// limit — and the decoder recursed once per level: a few thousand
    /// overflowed a worker's stack and aborted the process, every thread
    /// of the node with it. Nesting past `MAX_NESTING` is an error; one
    /// within it still decodes (on a 2 MiB stack, a tokio worker's).
    #[test]
    fn events_nested_past_the_limit_are_an_error_not_a_stack_overflow() {
        let nested = |levels: usize| {
            let mut bytes = vec![0u8, 0, 0];
            for _ in 0..levels {
                bytes.extend([7, 0]);
            }
            bytes.push(11);
            bytes
        };
        let decode = |bytes: Vec<u8>| {
            std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn(move || RunReport::from_wire(&bytes).is_ok())
                .unwrap()
                .join()
                .unwrap()
        };
        assert!(!decode(nested(1_000_000)), "deeper than the limit");
        let limit = usize::try_from(crate::event::MAX_NESTING).unwrap();
        assert!(decode(nested(limit)), "at the limit");
        assert!(!decode(nested(limit + 1)), "one past it");
    }

    /// A length read from the wire is checked before it is allocated: a
    /// string of 2⁴⁸ bytes claimed by ten bytes is an error (it aborted
    /// the process: the allocation failed), and so is a length of
    /// `u64::MAX` (a capacity-overflow panic).
    #[test]
    fn a_length_past_the_input_is_an_error_not_an_allocation() {
        use crate::codec::MAX_WIRE_BYTES;
        let huge = [0, 0xFD, 0, 0, 0, 0, 0, 0, 1, 0];
        assert!(RunSpec::from_wire(&huge).is_err());
        let max = [0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert!(String::from_wire(&max).is_err());
        assert!(<(String, u64, RunRequest)>::from_wire(&max).is_err());
        // Just under the limit but past the input: an error too.
        let under = u32::try_from(MAX_WIRE_BYTES - 1).unwrap().to_le_bytes();
        let claim = [&[0xFC][..], &under[..]].concat();
        assert!(String::from_wire(&claim).is_err());
    }

    /// The decode limit follows the input's size: a message of small
    /// integers (each claims 8 bytes for its one) still decodes at every
    /// step of it.
    #[test]
    fn every_size_up_to_the_limit_decodes() {
        for n in [
            0,
            4090,
            4096,
            4097,
            70_000,
            (1 << 20) - 3,
            1 << 20,
            (1 << 20) + 1,
        ] {
            let zeros = vec![0u64; n];
            let bytes = zeros.to_wire().unwrap();
            assert_eq!(Vec::<u64>::from_wire(&bytes).unwrap(), zeros, "{n} zeros");
            let maxes = vec![u64::MAX; n / 9];
            assert_eq!(
                Vec::<u64>::from_wire(&maxes.to_wire().unwrap()).unwrap(),
                maxes
            );
        }
    }

    #[test]
    fn a_message_over_the_limit_is_not_written() {
        use crate::codec::{CodecError, MAX_WIRE_BYTES};
        let at_limit = "x".repeat(MAX_WIRE_BYTES - 5);
        let bytes = at_limit.to_wire().unwrap();
        assert_eq!(bytes.len(), MAX_WIRE_BYTES);
        assert_eq!(String::from_wire(&bytes).unwrap(), at_limit);
        let over = "x".repeat(MAX_WIRE_BYTES);
        let err = over.to_wire().unwrap_err();
        assert!(
            matches!(err, CodecError::TooLarge { bytes, limit: MAX_WIRE_BYTES } if bytes == MAX_WIRE_BYTES + 5),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the message is {} bytes, over the wire's limit of {MAX_WIRE_BYTES}",
                MAX_WIRE_BYTES + 5
            )
        );
        let too_long = vec![0; MAX_WIRE_BYTES + 1];
        assert!(matches!(
            String::from_wire(&too_long),
            Err(CodecError::TooLarge { bytes, limit: MAX_WIRE_BYTES }) if bytes == MAX_WIRE_BYTES + 1
        ));
    }
}
