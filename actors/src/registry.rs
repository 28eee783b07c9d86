//! The model registry: models by provider and name, each behind its own
//! ModelGate (one gate per set of weights). Profile and inline overrides
//! resolve here, falling back to the parent's model.

use std::sync::Arc;

use ractor::SpawnErr;

use crate::gate::GateHandle;
use crate::hub::Refused;
use crate::model::Model;
use crate::profile::{ProfileSet, ProfileWarning};

/// One registered model.
#[derive(Clone)]
pub(crate) struct RegisteredModel {
    /// Who serves it (`"anthropic"`, `"local"`, …).
    pub(crate) provider: String,
    /// Its name (`"claude-haiku-4-5"`, `"qwen2.5-7b"`, …).
    pub(crate) name: String,
    /// The model.
    pub(crate) model: Arc<dyn Model>,
    /// Its gate.
    pub(crate) gate: GateHandle,
}

impl std::fmt::Debug for RegisteredModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.name)
    }
}

/// Models by provider and name.
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {
    models: Vec<RegisteredModel>,
    /// `alias` → `(provider, name)`, in the order added.
    aliases: Vec<(String, String, String)>,
    /// An override naming nothing known runs on the parent's model.
    falls_back: bool,
}

impl ModelRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a model with a new gate of `capacity` (see the gate's note
    /// on choosing it; 0 is read as 1). Registering the same provider and name again
    /// replaces it.
    pub async fn register(
        &mut self,
        provider: impl Into<String>,
        name: impl Into<String>,
        model: Arc<dyn Model>,
        capacity: usize,
    ) -> Result<(), SpawnErr> {
        let gate = GateHandle::spawn(capacity).await?;
        self.register_with_gate(provider, name, model, gate);
        Ok(())
    }

    /// Registers a model behind an existing gate (share a gate between two
    /// names only when they are the same weights).
    pub fn register_with_gate(
        &mut self,
        provider: impl Into<String>,
        name: impl Into<String>,
        model: Arc<dyn Model>,
        gate: GateHandle,
    ) {
        let (provider, name) = (provider.into(), name.into());
        self.models
            .retain(|m| !(m.provider == provider && m.name == name));
        self.models.push(RegisteredModel {
            provider,
            name,
            model,
            gate,
        });
    }

    /// Lets overrides name `model` by `alias` (Claude Code's `sonnet`,
    /// `opus`, `haiku`, or a full provider model id): an override of
    /// `alias` with no provider resolves to `provider`'s `model`. Adding an
    /// alias again replaces it. (`inherit` needs no alias: it is the
    /// parent's model.)
    pub fn alias(
        mut self,
        alias: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        let alias = alias.into();
        self.aliases.retain(|(a, _, _)| *a != alias);
        self.aliases.push((alias, provider.into(), model.into()));
        self
    }

    /// The policy for an override that names no registered model or
    /// alias. `false` (the default): the delegation is refused, and the
    /// refusal lists the models that may be named. `true`: the child runs
    /// on its parent's model (logged with `tracing::warn!`).
    pub fn fall_back_to_parent(mut self, falls_back: bool) -> Self {
        self.falls_back = falls_back;
        self
    }

    /// A warning for each profile whose `model` resolves to nothing here
    /// (neither a registered model nor an alias), listing what is known:
    /// to show at load time, before a delegation would fail (or, with
    /// [`fall_back_to_parent`](Self::fall_back_to_parent), run on the
    /// parent's model).
    pub fn check_profiles(&self, profiles: &ProfileSet) -> Vec<ProfileWarning> {
        profiles
            .iter()
            .filter_map(|p| {
                let model = p.model.as_deref()?;
                match self.resolve_strict(p.provider.as_deref(), Some(model)) {
                    Ok(_) => None,
                    Err(refused) => Some(ProfileWarning::UnknownModel {
                        path: p.source.clone(),
                        profile: p.name.clone(),
                        model: model.to_owned(),
                        reason: refused.to_string(),
                    }),
                }
            })
            .collect()
    }

    /// Every registered `(provider, name)`, in registration order.
    pub fn names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.models
            .iter()
            .map(|m| (m.provider.as_str(), m.name.as_str()))
    }

    /// The gate of the model `name` served by `provider`.
    pub fn gate(&self, provider: &str, name: &str) -> Option<&GateHandle> {
        self.models
            .iter()
            .find(|m| m.provider == provider && m.name == name)
            .map(|m| &m.gate)
    }

    /// The gate of `model` itself (the same object) when it is registered
    /// here: a parent on it shares that gate with the children that name
    /// it — one gate per set of weights. A gate of its own let the parent
    /// call beside such a child: two calls at once on a capacity-1 server.
    pub(crate) fn gate_of(&self, model: &Arc<dyn Model>) -> Option<&GateHandle> {
        let same =
            |m: &RegisteredModel| std::ptr::addr_eq(Arc::as_ptr(&m.model), Arc::as_ptr(model));
        self.models.iter().find(|m| same(m)).map(|m| &m.gate)
    }

    /// Every name of `model` (each with a gate of its own, registered
    /// twice) and every name queued at one of its gates (registered
    /// behind it: the same weights) queues at `gate` from now on.
    pub(crate) fn share_gate(&mut self, model: &Arc<dyn Model>, gate: &GateHandle) {
        let same =
            |m: &RegisteredModel| std::ptr::addr_eq(Arc::as_ptr(&m.model), Arc::as_ptr(model));
        let gates: Vec<ractor::ActorId> = (self.models.iter())
            .filter(|m| same(m))
            .map(|m| m.gate.actor().get_id())
            .collect();
        for registered in &mut self.models {
            if same(registered) || gates.contains(&registered.gate.actor().get_id()) {
                registered.gate = gate.clone();
            }
        }
    }

    /// Resolves an override. No `model`: `None` (use the parent's; a
    /// provider alone changes nothing, as in openheim). A `model` with a
    /// `provider`: that exact pair. A `model` alone: the one model of that
    /// name; a name served by several providers must name the provider.
    pub(crate) fn resolve(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Option<&RegisteredModel>, Refused> {
        match self.resolve_strict(provider, model) {
            Err(refused) if self.falls_back => {
                tracing::warn!(%refused, "model override unknown; the child runs on its parent's model");
                Ok(None)
            }
            other => other,
        }
    }

    /// [`resolve`](Self::resolve) without the fallback policy: aliases,
    /// then the exact rule.
    fn resolve_strict(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Option<&RegisteredModel>, Refused> {
        // `inherit` (Claude Code's word for the parent's model) is the
        // parent's, as no model named — in a call, or in a profile built
        // in code (a file's is dropped as it is read), whatever provider
        // it names (a provider alone changes nothing).
        let Some(mut model) =
            model.filter(|m| !m.is_empty() && !m.trim().eq_ignore_ascii_case("inherit"))
        else {
            return Ok(None);
        };
        let mut provider = provider;
        let written = model;
        if provider.is_none_or(str::is_empty)
            && let Some((_, p, m)) = self.aliases.iter().find(|(a, _, _)| a == model)
        {
            provider = Some(p.as_str());
            model = m.as_str();
        }
        match self.resolve_exact(provider, model) {
            // An alias for a model not registered here: unknown as the
            // model wrote it (named by its target, the refusal read as if
            // it had asked for that, and listed the alias as allowed).
            Err(Refused::UnknownModel { .. }) if written != model => Err(Refused::UnknownModel {
                model: crate::delegation::shown(written),
                provider: None,
                available: self.listing(),
            }),
            other => other,
        }
    }

    fn resolve_exact(
        &self,
        provider: Option<&str>,
        model: &str,
    ) -> Result<Option<&RegisteredModel>, Refused> {
        let mut matches = self.models.iter().filter(|m| {
            m.name == model
                && provider
                    .filter(|p| !p.is_empty())
                    .is_none_or(|p| m.provider == p)
        });
        match (matches.next(), matches.next()) {
            (Some(found), None) => Ok(Some(found)),
            (Some(_), Some(_)) => Err(Refused::AmbiguousModel {
                model: model.to_owned(),
                providers: self
                    .models
                    .iter()
                    .filter(|m| m.name == model)
                    .map(|m| m.provider.clone())
                    .collect(),
            }),
            // Quoted on one short line: a model's 64 KiB `model` came back
            // whole in the refusal it reads.
            (None, _) => Err(Refused::UnknownModel {
                model: crate::delegation::shown(model),
                provider: provider
                    .filter(|p| !p.is_empty())
                    .map(crate::delegation::shown),
                available: self.listing(),
            }),
        }
    }

    fn listing(&self) -> String {
        if self.models.is_empty() {
            return "none (only your own model is available)".to_owned();
        }
        self.models
            .iter()
            .map(|m| format!("`{}` (provider `{}`)", m.name, m.provider))
            .chain(
                self.aliases
                    .iter()
                    // Only an alias that leads somewhere is offered.
                    .filter(|(_, p, m)| {
                        self.models.iter().any(|r| r.provider == *p && r.name == *m)
                    })
                    .map(|(a, _, m)| format!("`{a}` (for `{m}`)")),
            )
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::ScriptedModel;

    async fn registry() -> ModelRegistry {
        let mut r = ModelRegistry::new();
        for (provider, name) in [
            ("anthropic", "haiku"),
            ("local", "qwen"),
            ("ollama", "qwen"),
        ] {
            r.register(
                provider,
                name,
                ScriptedModel::new(vec![]).named(name).shared(),
                1,
            )
            .await
            .unwrap();
        }
        r
    }

    #[tokio::test]
    async fn overrides_resolve_or_fall_back_or_say_what_exists() {
        let r = registry().await;
        assert!(
            r.resolve(None, None).unwrap().is_none(),
            "no model: the parent's"
        );
        assert!(
            r.resolve(Some("anthropic"), None).unwrap().is_none(),
            "provider alone: the parent's"
        );
        assert_eq!(
            r.resolve(None, Some("haiku")).unwrap().unwrap().provider,
            "anthropic"
        );
        assert_eq!(
            r.resolve(Some("ollama"), Some("qwen"))
                .unwrap()
                .unwrap()
                .provider,
            "ollama"
        );
        let ambiguous = r.resolve(None, Some("qwen")).unwrap_err();
        assert_eq!(
            ambiguous,
            Refused::AmbiguousModel {
                model: "qwen".into(),
                providers: vec!["local".into(), "ollama".into()],
            }
        );
        assert_eq!(
            ambiguous.to_string(),
            "the model `qwen` is served by several providers (local, ollama); name the provider"
        );
        let unknown = r.resolve(Some("openai"), Some("gpt")).unwrap_err();
        assert!(
            matches!(&unknown, Refused::UnknownModel { model, provider: Some(p), .. }
                if model == "gpt" && p == "openai"),
            "{unknown:?}"
        );
        assert_eq!(
            unknown.to_string(),
            "no model `gpt` from provider `openai` is registered; the models you may pass are: `haiku` (provider `anthropic`), `qwen` (provider `local`), `qwen` (provider `ollama`); or omit `model` to run on your own model"
        );
    }

    #[tokio::test]
    async fn each_distinct_model_has_its_own_gate_and_re_registering_replaces() {
        let mut r = registry().await;
        let ids: std::collections::HashSet<_> = r
            .names()
            .map(|(p, n)| r.gate(p, n).unwrap().actor().get_id())
            .collect();
        assert_eq!(ids.len(), 3);
        r.register("local", "qwen", ScriptedModel::new(vec![]).shared(), 2)
            .await
            .unwrap();
        assert_eq!(
            r.names().collect::<Vec<_>>(),
            [
                ("anthropic", "haiku"),
                ("ollama", "qwen"),
                ("local", "qwen")
            ]
        );
        let gate = r.gate("local", "qwen").unwrap();
        assert_eq!(gate.snapshot().await.unwrap().capacity, 2);
        assert!(r.gate("local", "haiku").is_none());
    }
    #[tokio::test]
    async fn an_alias_resolves_to_its_model_and_is_listed() {
        let r = registry()
            .await
            .alias("sonnet", "anthropic", "haiku")
            .alias("claude-3-5-haiku-latest", "anthropic", "haiku");
        let found = r.resolve(None, Some("sonnet")).unwrap().unwrap();
        assert_eq!(
            (found.provider.as_str(), found.name.as_str()),
            ("anthropic", "haiku")
        );
        assert!(
            r.resolve(None, Some("claude-3-5-haiku-latest"))
                .unwrap()
                .is_some()
        );
        // A provider given with the alias asks for that exact pair.
        assert!(r.resolve(Some("local"), Some("sonnet")).is_err());
        let unknown = r.resolve(None, Some("opus")).unwrap_err().to_string();
        assert!(unknown.contains("`sonnet` (for `haiku`)"), "{unknown}");
    }

    /// An alias for a model not registered here (a typo, or registered
    /// later under another provider) was offered as "`sonnet` (for
    /// `nope`)"; the model that named it read "the model `nope` is not
    /// registered", with `sonnet` listed again as allowed. It is not
    /// offered, and is unknown as written.
    #[tokio::test]
    async fn an_alias_that_leads_nowhere_is_not_offered() {
        let r = registry().await.alias("sonnet", "anthropic", "nope");
        let Err(Refused::UnknownModel {
            model, available, ..
        }) = r.resolve(None, Some("sonnet"))
        else {
            panic!("resolved");
        };
        assert_eq!(model, "sonnet");
        assert!(!available.contains("sonnet"), "{available}");
    }

    #[tokio::test]
    async fn an_unknown_override_is_refused_or_falls_back_by_policy() {
        let strict = registry().await;
        assert!(matches!(
            strict.resolve(None, Some("opus")),
            Err(Refused::UnknownModel { .. })
        ));
        let lenient = strict.clone().fall_back_to_parent(true);
        assert!(
            lenient.resolve(None, Some("opus")).unwrap().is_none(),
            "the parent's model"
        );
        // A known model still resolves.
        assert!(lenient.resolve(None, Some("haiku")).unwrap().is_some());
    }

    #[tokio::test]
    async fn profiles_naming_unknown_models_are_warned_with_what_is_known() {
        use crate::profile::{Profile, ProfileSet, ProfileWarning};
        let profile = |name: &str, model: Option<&str>| Profile {
            name: name.into(),
            model: model.map(str::to_owned),
            source: format!("/a/{name}.md").into(),
            ..Default::default()
        };
        let set = ProfileSet::from_profiles([
            profile("a", Some("opus")),
            profile("b", Some("sonnet")),
            profile("c", None),
            profile("d", Some("haiku")),
        ]);
        let r = registry().await.alias("sonnet", "anthropic", "haiku");
        let warnings = r.check_profiles(&set);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let ProfileWarning::UnknownModel {
            profile,
            model,
            reason,
            ..
        } = &warnings[0]
        else {
            panic!("{warnings:?}");
        };
        assert_eq!((profile.as_str(), model.as_str()), ("a", "opus"));
        assert!(
            reason.contains("`haiku` (provider `anthropic`)"),
            "{reason}"
        );
        // The policy to fall back does not hide the warning.
        assert_eq!(r.fall_back_to_parent(true).check_profiles(&set).len(), 1);
    }
}
