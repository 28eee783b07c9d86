//! What crosses between nodes: ractor_cluster messages whose only fields
//! are our payloads as bytes (so ractor_cluster's own decoders, which
//! panic on bad input, only ever copy bytes), decoded here into a
//! `Result`.

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use subagents_messages::codec::{CodecError, Wire};
use subagents_messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};

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
    /// Start a run: its header (the asking node and the run's key) and
    /// its [`RunSpec`], each as bytes — apart, so a node that cannot read
    /// the spec (another version's, a forged one) still knows whom to
    /// tell ([`decode_start`]).
    Start(Vec<u8>, Vec<u8>),
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
    /// A report about a run: its header (the run's key and the report's
    /// number) and its [`ReportBody`], each as bytes — apart, so a body
    /// this node cannot read (another version's event) still fills its
    /// place in the run's reports ([`decode_report`]).
    Report(Vec<u8>, Vec<u8>),
    /// Sent by this node's own session watcher and heartbeats: node (the
    /// first `String`) is lost, why (the second); its runs end lost —
    /// after the reports already in this mailbox, which were received
    /// before it.
    NodeLost(String, String),
}

/// A run to start, and the node whose inbox takes its reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Start {
    pub(crate) spec: RunSpec,
    pub(crate) reply_to: String,
}

/// The message that starts `spec` on a node, its reports to `reply_to`.
pub(crate) fn encode_start(spec: &RunSpec, reply_to: &str) -> Result<HostMsg, CodecError> {
    let header = (reply_to.to_owned(), spec.key).to_wire()?;
    Ok(HostMsg::Start(header, spec.to_wire()?))
}

/// A start this node could not read, and whom to tell when its header
/// was read (the spec was not: another version's, a forged one).
#[derive(Debug)]
pub(crate) struct UnreadStart {
    /// The asking node and the run's key, when they were read.
    pub(crate) header: Option<(String, u64)>,
    /// Why it could not be read.
    pub(crate) error: CodecError,
}

/// A [`HostMsg::Start`]'s two parts, read.
pub(crate) fn decode_start(header: &[u8], spec: &[u8]) -> Result<Start, UnreadStart> {
    let (reply_to, key) = <(String, u64)>::from_wire(header).map_err(|error| UnreadStart {
        header: None,
        error,
    })?;
    let error = match RunSpec::from_wire(spec) {
        Ok(spec) if spec.key == key => return Ok(Start { spec, reply_to }),
        Ok(spec) => CodecError::Decode(format!(
            "the run's key {} is not its header's {key}",
            spec.key
        )),
        Err(error) => error,
    };
    Err(UnreadStart {
        header: Some((reply_to, key)),
        error,
    })
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

/// The message that carries `report`; an error names what could not be
/// encoded (its body: the header is two numbers).
pub(crate) fn encode_report(report: &RunReport) -> Result<InboxMsg, CodecError> {
    let header = (report.key, report.seq).to_wire()?;
    Ok(InboxMsg::Report(header, report.body.to_wire()?))
}

/// A report this node could not read, and which run and place it was
/// when its header was read (its body was not).
#[derive(Debug)]
pub(crate) struct UnreadReport {
    /// The run's key and the report's number, when they were read.
    pub(crate) header: Option<(u64, u64)>,
    /// Why it could not be read.
    pub(crate) error: CodecError,
}

/// An [`InboxMsg::Report`]'s two parts, read.
pub(crate) fn decode_report(header: &[u8], body: &[u8]) -> Result<RunReport, UnreadReport> {
    let (key, seq) = <(u64, u64)>::from_wire(header).map_err(|error| UnreadReport {
        header: None,
        error,
    })?;
    match ReportBody::from_wire(body) {
        Ok(body) => Ok(RunReport { key, seq, body }),
        Err(error) => Err(UnreadReport {
            header: Some((key, seq)),
            error,
        }),
    }
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
        let HostMsg::Start(header, bytes) = encode_start(&spec, "a").unwrap() else {
            unreachable!("a start")
        };
        let start = decode_start(&header, &bytes).unwrap();
        assert_eq!(start.spec, spec);
        assert_eq!(start.reply_to, "a");
        // A spec this node cannot read: whom to tell is still known.
        let unread = decode_start(&header, &bytes[..bytes.len() / 2]).unwrap_err();
        assert_eq!(unread.header, Some(("a".to_owned(), 3)));
        let other = RunSpec { key: 4, ..spec };
        let unread = decode_start(&header, &other.to_wire().unwrap()).unwrap_err();
        assert!(
            unread.error.to_string().contains("key 4"),
            "{}",
            unread.error
        );
        assert_eq!(decode_start(&bytes, &header).unwrap_err().header, None);
        let request = encode_request("a", 3, &RunRequest::Stop).unwrap();
        assert_eq!(
            decode_request(&request).unwrap(),
            ("a".to_owned(), 3, RunRequest::Stop)
        );
        for bad in [&bytes[..bytes.len() / 2], &[0xff; 9][..], &[][..]] {
            assert!(decode_start(bad, &bytes).is_err());
            assert!(decode_report(bad, bad).is_err());
        }
        assert!(decode_request(&request[..1]).is_err());
    }
}
