//! A profile's request options against the builder's child options.

use super::*;

/// docs/profiles.md: a profile's request options apply "over the
/// `DelegationBuilder`'s `child_request_options` field by field". The
/// end-to-end test set neither `top_p` nor a profile's `seed`, so the
/// builder's value beating the profile's on those two fields passed.
/// Here both set each: the profile's reach the child's model calls, and
/// a field only the builder sets (`max_tokens`) is kept.
#[tokio::test(start_paused = true)]
async fn a_profiles_top_p_and_seed_beat_the_builders() {
    let writer = claude_profile(
        "/agents/writer.md",
        "---\ntopP: 0.25\nseed: 42\n---\nYou write.",
    );
    assert_eq!(
        (writer.options.top_p, writer.options.seed),
        (Some(0.25), Some(42))
    );
    let options = writer_call_options(
        writer,
        RequestOptions {
            max_tokens: Some(1000),
            top_p: Some(0.75),
            seed: Some(7),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        options,
        RequestOptions {
            max_tokens: Some(1000),
            top_p: Some(0.25),
            seed: Some(42),
            ..Default::default()
        },
        "the profile's top_p and seed over the builder's, the builder's max_tokens kept"
    );
}

/// The request options of the first model call of a child started from
/// profile `writer` (its body "You write."), under a builder whose
/// children's options are `child`.
pub(super) async fn writer_call_options(writer: Profile, child: RequestOptions) -> RequestOptions {
    let (spy, seen) = spy(
        "spy",
        ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run_named("writer", "write it")),
            Reply::answer("Done."),
        ])
        .with_script("You write.", vec![Reply::answer("written")]),
    );
    let (parent, mut events) = DelegationBuilder::new(spy)
        .profiles(ProfileSet::from_profiles([writer]))
        .child_request_options(child)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let seen = seen.lock().unwrap();
    seen.iter()
        .find(|r| {
            r.system_prompt()
                .is_some_and(|p| p.starts_with("You write."))
        })
        .expect("the child made a model call")
        .options
        .clone()
}
