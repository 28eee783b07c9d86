//! What crosses between nodes: ractor_cluster messages whose only fields
//! are our payloads as bytes (so ractor_cluster's own decoders, which
//! panic on bad input, only ever copy bytes), decoded here into a
//! `Result`.

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use subagents_messages::codec::{CodecError, Wire};
use subagents_messages::remote::{RunReport, RunRequest, RunSpec};

/// The `pg` group of a node's host: one per node name.
pub(crate) fn host_group(node: &str) -> String {
    format!("subagents.host.{node}")
}

/// The `pg` group of a node's inbox.
pub(crate) fn inbox_group(node: &str) -> String {
    format!("subagents.inbox.{node}")
}

/// What a node host is told (by another node's link).
#[derive(RactorClusterMessage)]
pub(crate) enum HostMsg {
    /// Start a run: a [`Start`], as bytes.
    Start(Vec<u8>),
    /// A request for a run: `(asking node, key, RunRequest)`, as bytes.
    Request(Vec<u8>),
    /// How many runs are live here (the heartbeat, and the count
    /// `Placement::LeastLoaded` reads).
    #[rpc]
    Live(RpcReplyPort<u64>),
    /// The results kept here of runs whose parent's node was lost: a
    /// `Vec<KeptRun>`, as bytes.
    #[rpc]
    Kept(RpcReplyPort<Vec<u8>>),
    /// Sent by this node's own session watcher: the session of node
    /// (the `String`) closed — its runs here are orphans now.
    ParentLost(String),
}

/// The result of a run kept on its node after its parent's node was lost
/// (the parent's policy was `Detach`), for fetching.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct KeptRun {
    /// The node whose child it was.
    pub parent_node: String,
    /// The child's id there.
    pub id: subagents_messages::AgentId,
    /// How its run ended.
    pub result: subagents_messages::AgentResult,
    /// Its whole conversation.
    pub conversation: Vec<subagents_messages::ChatMessage>,
}

/// What an inbox is told (by another node's host).
#[derive(RactorClusterMessage)]
pub(crate) enum InboxMsg {
    /// A report about a run: a [`RunReport`], as bytes.
    Report(Vec<u8>),
    /// Sent by this node's own session watcher and heartbeats: node (the
    /// first `String`) is lost, why (the second); its runs end lost —
    /// after the reports already in this mailbox, which were received
    /// before it.
    NodeLost(String, String),
}

/// A run to start, and the node whose inbox takes its reports.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Start {
    pub(crate) spec: RunSpec,
    pub(crate) reply_to: String,
}

pub(crate) fn encode_start(spec: RunSpec, reply_to: &str) -> Result<Vec<u8>, CodecError> {
    Start {
        spec,
        reply_to: reply_to.to_owned(),
    }
    .to_wire()
}

pub(crate) fn decode_start(bytes: &[u8]) -> Result<Start, CodecError> {
    Start::from_wire(bytes)
}

pub(crate) fn encode_request(
    from: &str,
    key: u64,
    request: &RunRequest,
) -> Result<Vec<u8>, CodecError> {
    (from.to_owned(), key, request.clone()).to_wire()
}

pub(crate) fn decode_request(bytes: &[u8]) -> Result<(String, u64, RunRequest), CodecError> {
    <(String, u64, RunRequest)>::from_wire(bytes)
}

pub(crate) fn decode_report(bytes: &[u8]) -> Result<RunReport, CodecError> {
    RunReport::from_wire(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use subagents_messages::{AgentId, Limits};

    #[test]
    fn payloads_round_trip_and_bad_bytes_are_errors() {
        let spec = RunSpec {
            key: 3,
            id: AgentId::new("agent_1"),
            system_prompt: "Worker".into(),
            input: "go".into(),
            followups: Vec::new(),
            conversation: Vec::new(),
            model: "scripted".into(),
            tools: vec!["sleep".into()],
            limits: Limits::default(),
            depth: 1,
            options: Default::default(),
            keep_if_orphaned: false,
        };
        let bytes = encode_start(spec.clone(), "a").unwrap();
        let start = decode_start(&bytes).unwrap();
        assert_eq!(start.spec, spec);
        assert_eq!(start.reply_to, "a");
        let request = encode_request("a", 3, &RunRequest::Stop).unwrap();
        assert_eq!(
            decode_request(&request).unwrap(),
            ("a".to_owned(), 3, RunRequest::Stop)
        );
        for bad in [&bytes[..bytes.len() / 2], &[0xff; 9][..], &[][..]] {
            assert!(decode_start(bad).is_err());
            assert!(decode_report(bad).is_err());
        }
        assert!(decode_request(&request[..1]).is_err());
    }
}
