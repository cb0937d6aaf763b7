//! Priority admission: a pod's `spec.priority` (and `preemptionPolicy`) comes from its
//! PriorityClass. A pod naming no class gets the global default class if there is one
//! (several: the one with the lowest value, as Kubernetes picks), else priority 0 and
//! `PreemptLowerPriority`. A class that does not exist, or a priority or policy given in the
//! pod that differs from the class's, is refused with 403 and Kubernetes' message. An update
//! keeps the priority the pod was created with.

use std::sync::Arc;

use serde_json::{Value, json};

use super::pods::{Reader, forbidden, is_pod};
use super::{Attributes, Mutating, Operation};
use crate::api::error::ApiError;
use crate::storage::Store;

/// The preemption policy of a pod without a class when no class is the global default.
const DEFAULT_PREEMPTION: &str = "PreemptLowerPriority";

/// The mutating stage: see the [module docs](self).
#[derive(Debug)]
pub struct Priority {
    classes: Reader,
}

impl Priority {
    /// Reads PriorityClasses from `store` under the collection prefix `classes`.
    pub fn new(store: Arc<Store>, classes: String) -> Self {
        Priority {
            classes: Reader::new(store, classes),
        }
    }

    /// The global default class: its name, value and policy.
    fn global_default(&self) -> Option<(String, i64, Option<String>)> {
        self.classes
            .list(None)
            .into_iter()
            .filter(|c| c["globalDefault"].as_bool() == Some(true))
            .filter_map(|c| {
                Some((
                    c["metadata"]["name"].as_str()?.to_owned(),
                    c["value"].as_i64()?,
                    c["preemptionPolicy"].as_str().map(str::to_owned),
                ))
            })
            .min_by_key(|(_, value, _)| *value)
    }
}

impl Mutating for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn admit(&self, attrs: &Attributes<'_>, pod: &mut Value) -> Result<(), ApiError> {
        if !is_pod(attrs) || !pod["spec"].is_object() {
            return Ok(());
        }
        if attrs.operation == Operation::Update {
            if let Some(old) = attrs.old {
                for field in ["priority", "preemptionPolicy"] {
                    if pod["spec"][field].is_null() && !old["spec"][field].is_null() {
                        pod["spec"][field] = old["spec"][field].clone();
                    }
                }
            }
            return Ok(());
        }
        let named = pod["spec"]["priorityClassName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        let (priority, policy) = match named {
            None => match self.global_default() {
                Some((name, value, policy)) => {
                    pod["spec"]["priorityClassName"] = json!(name);
                    (value, policy)
                }
                None => (0, Some(DEFAULT_PREEMPTION.to_string())),
            },
            Some(name) => match self.classes.get(None, &name) {
                Some(class) => (
                    class["value"].as_i64().unwrap_or(0),
                    class["preemptionPolicy"].as_str().map(str::to_owned),
                ),
                None => {
                    return Err(forbidden(
                        attrs,
                        pod,
                        format!("no PriorityClass with name {name} was found"),
                    ));
                }
            },
        };
        if let Some(given) = pod["spec"]["priority"].as_i64()
            && given != priority
        {
            return Err(forbidden(
                attrs,
                pod,
                format!(
                    "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
                ),
            ));
        }
        pod["spec"]["priority"] = json!(priority);
        if let Some(policy) = policy {
            if let Some(given) = pod["spec"]["preemptionPolicy"].as_str()
                && given != policy
            {
                return Err(forbidden(
                    attrs,
                    pod,
                    format!(
                        "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                    ),
                ));
            }
            pod["spec"]["preemptionPolicy"] = json!(policy);
        }
        Ok(())
    }
}
