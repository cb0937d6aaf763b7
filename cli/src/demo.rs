//! `kore up --demo`: applies every operator's samples, in order, then waits until what they
//! ask for exists and prints it — or, after a time limit, what is still missing.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kore_configmap_sync::ConfigMapSync;
use kore_operator::Operator;
use kore_sample_controller::Foo;
use kube::api::Api;
use serde_json::Value;

use kore_operator::install::{apply, describe};

/// How a sample is doing: converged (with a line to print), or not yet (and why).
type Progress = Result<String, String>;

/// Applies the samples of `operators` and waits up to `timeout` for them to converge,
/// printing each step. Returns what did not converge (empty when everything did).
pub(crate) async fn run(
    admin: &kube::Client,
    operators: &[Operator],
    timeout: Duration,
) -> anyhow::Result<Vec<String>> {
    let started = tokio::time::Instant::now();
    let mut samples = Vec::new();
    for operator in operators {
        for sample in &operator.samples {
            apply(admin, sample).await?;
            println!("demo: applied {}", describe(sample));
            samples.push(sample.clone());
        }
    }
    if samples.is_empty() {
        println!("demo: the operators have no samples to apply");
        return Ok(Vec::new());
    }
    let deadline = started + timeout;
    loop {
        let mut progress = Vec::with_capacity(samples.len());
        for sample in &samples {
            if let Some(p) = check(admin, sample).await {
                progress.push(p);
            }
        }
        if progress.iter().all(Result::is_ok) {
            println!("demo: converged in {} ms:", started.elapsed().as_millis());
            for line in progress.into_iter().flatten() {
                println!("  {line}");
            }
            return Ok(Vec::new());
        }
        if tokio::time::Instant::now() >= deadline {
            println!("demo: did not converge within {timeout:?}:");
            let mut missing = Vec::new();
            for p in progress {
                match p {
                    Ok(line) => println!("  ok: {line}"),
                    Err(why) => {
                        println!("  NOT CONVERGED: {why}");
                        missing.push(why);
                    }
                }
            }
            println!("  (the operators keep trying; see their logs and `kubectl describe`)");
            return Ok(missing);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What converged means for the kinds the operators serve; `None` for other kinds.
async fn check(admin: &kube::Client, sample: &Value) -> Option<Progress> {
    let ns = sample["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let name = sample["metadata"]["name"].as_str().unwrap_or_default();
    let api_version = sample["apiVersion"].as_str().unwrap_or_default();
    match sample["kind"].as_str() {
        Some("ConfigMapSync") if api_version.starts_with("sync.kore.dev/") => {
            Some(config_map_sync(admin, ns, name).await)
        }
        Some("Foo") if api_version.starts_with("samplecontroller.k8s.io/") => {
            Some(foo(admin, ns, name).await)
        }
        _ => None,
    }
}

/// Ready=True for the current generation, and every listed copy present.
async fn config_map_sync(admin: &kube::Client, ns: &str, name: &str) -> Progress {
    let what = format!("ConfigMapSync {ns}/{name}");
    let api: Api<ConfigMapSync> = Api::namespaced(admin.clone(), ns);
    let cms = api
        .get(name)
        .await
        .map_err(|e| format!("{what}: cannot be read: {e}"))?;
    let status = cms.status.clone().unwrap_or_default();
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
    let Some(ready) = ready else {
        return Err(format!("{what}: no Ready condition yet"));
    };
    if ready.status != "True" {
        return Err(format!(
            "{what}: Ready={} ({}: {})",
            ready.status, ready.reason, ready.message
        ));
    }
    if ready.observed_generation != cms.metadata.generation {
        return Err(format!("{what}: Ready describes an older generation"));
    }
    let copy = cms
        .spec
        .destination_name
        .clone()
        .unwrap_or_else(|| cms.spec.config_map_name.clone());
    for dest in &status.synced_namespaces {
        let copies: Api<ConfigMap> = Api::namespaced(admin.clone(), dest);
        match copies.get_opt(&copy).await {
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("{what}: the copy {dest}/{copy} is missing")),
            Err(e) => return Err(format!("{what}: reading {dest}/{copy}: {e}")),
        }
    }
    Ok(format!(
        "{what}: Ready; copies of {}/{} as ConfigMap {copy} in {}",
        cms.spec.source_namespace,
        cms.spec.config_map_name,
        status.synced_namespaces.join(", ")
    ))
}

/// A Deployment of the Foo's name, owned by it, with its replicas; and a status written.
async fn foo(admin: &kube::Client, ns: &str, name: &str) -> Progress {
    let what = format!("Foo {ns}/{name}");
    let foos: Api<Foo> = Api::namespaced(admin.clone(), ns);
    let object = foos
        .get(name)
        .await
        .map_err(|e| format!("{what}: cannot be read: {e}"))?;
    let deployment_name = &object.spec.deployment_name;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), ns);
    let deployment = deployments
        .get_opt(deployment_name)
        .await
        .map_err(|e| format!("{what}: reading Deployment {deployment_name}: {e}"))?
        .ok_or_else(|| format!("{what}: no Deployment {deployment_name} yet"))?;
    let owned = deployment
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| Some(&o.uid) == object.metadata.uid.as_ref() && o.controller == Some(true));
    if !owned {
        return Err(format!(
            "{what}: Deployment {deployment_name} is not controlled by the Foo"
        ));
    }
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    let wanted = object.spec.replicas.unwrap_or(1);
    if replicas != Some(wanted) {
        return Err(format!(
            "{what}: Deployment {deployment_name} has {replicas:?} replicas, not {wanted}"
        ));
    }
    let Some(status) = &object.status else {
        return Err(format!("{what}: no status yet"));
    };
    // kore up runs the Deployment controller and simulated nodes: the pods run.
    if status.available_replicas != wanted {
        return Err(format!(
            "{what}: status.availableReplicas={} of {wanted}",
            status.available_replicas
        ));
    }
    Ok(format!(
        "{what}: Deployment {deployment_name} with {wanted} replica(s), owned by the Foo; status.availableReplicas={wanted} (its pods run on simulated nodes)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_operators_running_the_demo_says_what_did_not_converge_and_why()
    -> anyhow::Result<()> {
        let env = kore_testenv::TestEnv::start().await?;
        let operators = crate::operators::all();
        for operator in &operators {
            kore_operator::install::crds(&env.client(), operator).await?;
        }
        let missing = run(&env.client(), &operators, Duration::from_millis(200)).await?;
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert!(
            missing[0].starts_with("ConfigMapSync demo-source/app-config: no Ready condition"),
            "{missing:?}"
        );
        assert_eq!(
            missing[1],
            "Foo default/example-foo: no Deployment example-foo yet"
        );
        Ok(())
    }
}
