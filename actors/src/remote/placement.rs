//! Where a hub's children run: here (the default), on one node, on the
//! least loaded, or by label. Chosen per child when it starts.

use std::sync::Arc;

use crate::remote::link::NodeLink;

/// Where a hub's children run. A child on another node is the same child
/// to the parent: its events, envelope, stops, approvals and wakes follow
/// docs/event-ordering.md exactly as a local child's (docs/cluster.md).
#[derive(Clone, Default)]
pub enum Placement {
    /// Every child runs on this node (the default).
    #[default]
    Local,
    /// Every child runs on that node.
    On(Arc<dyn NodeLink>),
    /// Each child runs where the fewest children are live, by the counts
    /// the nodes report: this thread's own children running here (each
    /// thread's hub counts its own, not the process's) against each
    /// node's [`NodeLink::live`]. Ties stay here; a node that reported
    /// nothing is not chosen.
    LeastLoaded(Vec<Arc<dyn NodeLink>>),
    /// A child runs on the first node with its profile's name among its
    /// [`NodeLink::labels`] that is not lost ([`NodeLink::is_lost`]).
    /// A child no such node is labelled for, or with no name
    /// ([`ChildRequest::name`](subagents_messages::ChildRequest::name):
    /// a prompt written in the call, the `agent` tool's children, a host's
    /// request without one — its shown name, the model's first line, put
    /// the model's own child on a node the host labelled for a profile):
    /// refused when `hard` (it must run on a labelled node), here
    /// otherwise.
    Labels {
        /// The nodes.
        nodes: Vec<Arc<dyn NodeLink>>,
        /// A child whose label no node has fails instead of running here.
        hard: bool,
    },
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |nodes: &[Arc<dyn NodeLink>]| -> Vec<String> {
            nodes.iter().map(|n| n.node().to_owned()).collect()
        };
        match self {
            Placement::Local => f.write_str("Local"),
            Placement::On(node) => f.debug_tuple("On").field(&node.node()).finish(),
            Placement::LeastLoaded(nodes) => {
                f.debug_tuple("LeastLoaded").field(&names(nodes)).finish()
            }
            Placement::Labels { nodes, hard } => f
                .debug_struct("Labels")
                .field("nodes", &names(nodes))
                .field("hard", hard)
                .finish(),
        }
    }
}

impl Placement {
    /// Where a child runs (`name` gives its name, asked only when labels
    /// decide), with `here_live` children live on this node (counted only
    /// when loads decide): `Ok(None)` here, `Ok(Some(node))` there, `Err`
    /// (a sentence) refused.
    ///
    /// A transport's `live`, `labels` or `is_lost` that panics (it runs in
    /// the hub's handler) refuses this child, naming the panic: it took
    /// the hub down, every child of the thread failed, and every later
    /// delegation was refused.
    pub(crate) fn choose(
        &self,
        name: impl FnOnce() -> String,
        here_live: impl FnOnce() -> usize,
    ) -> Result<Option<Arc<dyn NodeLink>>, String> {
        match self {
            Placement::Local => Ok(None),
            Placement::On(node) => Ok(Some(node.clone())),
            Placement::LeastLoaded(_) | Placement::Labels { .. } => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.choose_among(name, here_live)
                }))
                .unwrap_or_else(|panic| {
                    Err(format!(
                        "the transport panicked as a node was chosen for this sub-agent: {}",
                        crate::panics::panic_text(panic)
                    ))
                })
            }
        }
    }

    /// [`Placement::choose`] among nodes, asking the transports.
    fn choose_among(
        &self,
        name: impl FnOnce() -> String,
        here_live: impl FnOnce() -> usize,
    ) -> Result<Option<Arc<dyn NodeLink>>, String> {
        match self {
            Placement::Local => Ok(None),
            Placement::On(node) => Ok(Some(node.clone())),
            Placement::LeastLoaded(nodes) => {
                let here_live = here_live();
                let mut best: Option<(usize, &Arc<dyn NodeLink>)> = None;
                for node in nodes {
                    let Some(live) = node.live() else { continue };
                    if live < best.map_or(here_live, |(l, _)| l) {
                        best = Some((live, node));
                    }
                }
                Ok(best.map(|(_, node)| node.clone()))
            }
            Placement::Labels { nodes, hard } => {
                let name = name();
                if name.is_empty() {
                    return match hard {
                        false => Ok(None),
                        true => Err("only a named sub-agent (a profile's) is placed on a labelled node, and every sub-agent here must run on one".to_owned()),
                    };
                }
                let mut labelled = nodes.iter().filter(|n| n.labels().contains(&name));
                let any = labelled.clone().next().is_some();
                // A lost node is passed over, as `LeastLoaded` does: chosen,
                // every child with its label failed "node lost" though
                // another node with it was up.
                match (labelled.find(|n| !n.is_lost()), hard) {
                    (Some(node), _) => Ok(Some(node.clone())),
                    (None, false) => Ok(None),
                    (None, true) if any => Err(format!(
                        "every node labelled `{name}` is lost, and this sub-agent must run on one"
                    )),
                    (None, true) => Err(format!(
                        "no node is labelled `{name}`, and this sub-agent must run on one"
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use subagents_messages::remote::{RunRequest, RunSpec};

    use crate::remote::link::RunReports;

    struct Node {
        name: &'static str,
        labels: Vec<String>,
        live: Option<usize>,
    }

    impl NodeLink for Node {
        fn node(&self) -> &str {
            self.name
        }
        fn labels(&self) -> &[String] {
            &self.labels
        }
        fn live(&self) -> Option<usize> {
            self.live
        }
        fn start(&self, _: RunSpec, _: RunReports) -> Result<(), String> {
            Ok(())
        }
        fn request(&self, _: u64, _: RunRequest) -> Result<(), String> {
            Ok(())
        }
    }

    fn node(name: &'static str, labels: &[&str], live: Option<usize>) -> Arc<dyn NodeLink> {
        Arc::new(Node {
            name,
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            live,
        })
    }

    fn chosen(placement: &Placement, name: &str, here: usize) -> Result<Option<String>, String> {
        placement
            .choose(|| name.to_owned(), || here)
            .map(|n| n.map(|n| n.node().to_owned()))
    }

    #[test]
    fn local_and_forced() {
        assert_eq!(chosen(&Placement::Local, "x", 9), Ok(None));
        let on = Placement::On(node("b", &[], None));
        assert_eq!(chosen(&on, "x", 0), Ok(Some("b".into())));
    }

    #[test]
    fn least_loaded_by_reported_counts_ties_stay_here() {
        let placement = Placement::LeastLoaded(vec![
            node("b", &[], Some(2)),
            node("c", &[], Some(1)),
            node("d", &[], None),
        ]);
        assert_eq!(chosen(&placement, "x", 3), Ok(Some("c".into())));
        assert_eq!(chosen(&placement, "x", 1), Ok(None), "a tie stays here");
        assert_eq!(chosen(&placement, "x", 0), Ok(None));
        let unknown = Placement::LeastLoaded(vec![node("d", &[], None)]);
        assert_eq!(chosen(&unknown, "x", 50), Ok(None));
    }

    #[test]
    fn labels_hard_and_soft() {
        let nodes = vec![
            node("gpu", &["Coder"], Some(0)),
            node("data", &["Indexer"], None),
        ];
        let soft = Placement::Labels {
            nodes: nodes.clone(),
            hard: false,
        };
        let hard = Placement::Labels { nodes, hard: true };
        assert_eq!(chosen(&soft, "Indexer", 0), Ok(Some("data".into())));
        assert_eq!(chosen(&soft, "Coder", 0), Ok(Some("gpu".into())));
        assert_eq!(chosen(&soft, "Writer", 0), Ok(None));
        assert_eq!(chosen(&hard, "Coder", 0), Ok(Some("gpu".into())));
        let refused = chosen(&hard, "Writer", 0).unwrap_err();
        assert!(
            refused.contains("no node is labelled `Writer`"),
            "{refused}"
        );
    }
}
