//! The model registry: models by provider and name, each behind its own
//! ModelGate (one gate per set of weights). Profile and inline overrides
//! resolve here, falling back to the parent's model.

use std::sync::Arc;

use ractor::SpawnErr;

use crate::gate::GateHandle;
use crate::hub::Refused;
use crate::model::Model;

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
}

impl ModelRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a model with a new gate of `capacity` (see the gate's note
    /// on choosing it). Registering the same provider and name again
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

    /// Resolves an override. No `model`: `None` (use the parent's; a
    /// provider alone changes nothing, as in openheim). A `model` with a
    /// `provider`: that exact pair. A `model` alone: the one model of that
    /// name; a name served by several providers must name the provider.
    pub(crate) fn resolve(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Option<&RegisteredModel>, Refused> {
        let Some(model) = model.filter(|m| !m.is_empty()) else {
            return Ok(None);
        };
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
            (None, _) => Err(Refused::UnknownModel {
                model: model.to_owned(),
                provider: provider.filter(|p| !p.is_empty()).map(str::to_owned),
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
}
