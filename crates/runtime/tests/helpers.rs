//! The event recorder, finalizer helper and status writer against a real in-process API
//! server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kore_runtime::events::{Event, EventType, Recorder, Reporter};
use kore_runtime::finalizer::{self, Outcome};
use kore_runtime::status::{StatusWrite, StatusWriter};
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const FINALIZER: &str = "kore.dev/cleanup";

async fn config_map(env: &kore_testenv::TestEnv, name: &str) -> anyhow::Result<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    Ok(api.create(&PostParams::default(), &cm).await?)
}

/// Appends a finalizer with a JSON patch: atomic on the server, no resourceVersion, so it
/// never conflicts but makes every concurrent conditional write conflict.
async fn append_finalizer(client: &kube::Client, name: &str, value: &str) -> anyhow::Result<()> {
    let body = json!([{"op": "add", "path": "/metadata/finalizers/-", "value": value}]);
    let req = http::Request::patch(format!("/api/v1/namespaces/default/configmaps/{name}"))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(serde_json::to_vec(&body)?)?;
    client.request::<ConfigMap>(req).await?;
    Ok(())
}

fn failed_sync(note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "FailedSync".into(),
        action: "Sync".into(),
        note: Some(note.into()),
        related: None,
    }
}

#[tokio::test]
async fn repeats_of_the_same_event_bump_the_series_count_of_one_event() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let cm = config_map(&env, "subject").await?;
    let regarding = cm.object_ref(&());
    let recorder = Recorder::new(env.client(), Reporter::new("kore.dev/test"));
    for _ in 0..3 {
        recorder.publish(&failed_sync("boom"), &regarding).await?;
    }
    recorder.publish(&failed_sync("other"), &regarding).await?;

    let events: Api<KubeEvent> = Api::namespaced(env.client(), "default");
    let mut list = events.list(&ListParams::default()).await?.items;
    list.sort_by_key(|e| e.note.clone());
    assert_eq!(list.len(), 2, "{list:?}");
    let boom = &list[0];
    assert_eq!(boom.note.as_deref(), Some("boom"));
    assert_eq!(boom.series.as_ref().map(|s| s.count), Some(3));
    assert_eq!(boom.type_.as_deref(), Some("Warning"));
    assert_eq!(boom.reason.as_deref(), Some("FailedSync"));
    assert_eq!(boom.reporting_controller.as_deref(), Some("kore.dev/test"));
    assert_eq!(
        boom.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("subject")
    );
    assert!(list[1].series.is_none(), "a single event has no series");
    Ok(())
}

#[tokio::test]
async fn recorded_events_are_written_in_the_background_and_repeats_still_count()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let cm = config_map(&env, "subject").await?;
    let recorder = Recorder::new(env.client(), Reporter::new("kore.dev/test"));
    for _ in 0..5 {
        recorder.record(failed_sync("boom"), cm.object_ref(&()));
    }
    recorder.record(failed_sync("other"), cm.object_ref(&()));
    recorder.flush().await;

    let events: Api<KubeEvent> = Api::namespaced(env.client(), "default");
    let mut list = events.list(&ListParams::default()).await?.items;
    list.sort_by_key(|e| e.note.clone());
    let counts: Vec<(Option<String>, Option<i32>)> = list
        .iter()
        .map(|e| (e.note.clone(), e.series.as_ref().map(|s| s.count)))
        .collect();
    assert_eq!(
        counts,
        [(Some("boom".into()), Some(5)), (Some("other".into()), None)]
    );
    assert_eq!(recorder.dropped(), 0);
    Ok(())
}

#[tokio::test]
async fn a_full_event_queue_drops_and_counts_what_does_not_fit() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let cm = config_map(&env, "subject").await?;
    let recorder = Recorder::new(env.client(), Reporter::new("kore.dev/test"));
    // The test runs on one thread, so the writer cannot drain the queue between these calls.
    let burst = kore_runtime::events::MAX_QUEUED + 250;
    for i in 0..burst {
        recorder.record(failed_sync(&format!("failure {i}")), cm.object_ref(&()));
    }
    assert_eq!(recorder.dropped(), 250);
    recorder.flush().await;

    let events: Api<KubeEvent> = Api::namespaced(env.client(), "default");
    let list = events.list(&ListParams::default()).await?.items;
    assert_eq!(list.len(), kore_runtime::events::MAX_QUEUED);
    // The first ones were kept, the last ones dropped.
    assert!(list.iter().any(|e| e.note.as_deref() == Some("failure 0")));
    assert!(
        !list
            .iter()
            .any(|e| e.note.as_deref() == Some("failure 1249"))
    );
    // Nothing is lost once the queue has room again.
    recorder.record(failed_sync("after"), cm.object_ref(&()));
    recorder.flush().await;
    let list = events.list(&ListParams::default()).await?.items;
    assert!(list.iter().any(|e| e.note.as_deref() == Some("after")));
    assert_eq!(recorder.dropped(), 250);
    Ok(())
}

#[tokio::test]
async fn a_repeat_after_its_event_was_deleted_starts_a_new_event() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let cm = config_map(&env, "subject").await?;
    let recorder = Recorder::new(env.client(), Reporter::new("kore.dev/test"));
    let events: Api<KubeEvent> = Api::namespaced(env.client(), "default");
    recorder
        .publish(&failed_sync("boom"), &cm.object_ref(&()))
        .await?;
    events
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    recorder
        .publish(&failed_sync("boom"), &cm.object_ref(&()))
        .await?;
    let list = events.list(&ListParams::default()).await?.items;
    assert_eq!(list.len(), 1);
    assert!(list[0].series.is_none());
    Ok(())
}

#[derive(Debug, thiserror::Error)]
#[error("cleanup failed")]
struct CleanupFailed;

#[tokio::test]
async fn finalize_adds_applies_then_cleans_up_and_lets_the_object_go() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = config_map(&env, "guarded").await?;
    let cleanups = AtomicUsize::new(0);
    let run = |obj: ConfigMap, fail: bool| {
        let api = api.clone();
        let cleanups = &cleanups;
        async move {
            finalizer::finalize(&api, FINALIZER, Arc::new(obj), |ev| async move {
                match ev {
                    finalizer::Event::Apply(_) => Ok("applied"),
                    finalizer::Event::Cleanup(_) if fail => Err(CleanupFailed),
                    finalizer::Event::Cleanup(_) => {
                        cleanups.fetch_add(1, Ordering::SeqCst);
                        Ok("cleaned")
                    }
                }
            })
            .await
        }
    };

    assert_eq!(run(cm, false).await?, Outcome::Added);
    let cm = api.get("guarded").await?;
    assert_eq!(cm.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
    assert_eq!(run(cm, false).await?, Outcome::Applied("applied"));

    api.delete("guarded", &DeleteParams::default()).await?;
    let deleting = api.get("guarded").await?;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert!(matches!(
        run(deleting.clone(), true).await,
        Err(finalizer::Error::Reconcile(CleanupFailed))
    ));
    assert!(
        api.get_opt("guarded").await?.is_some(),
        "held while cleanup fails"
    );
    assert_eq!(
        run(deleting.clone(), false).await?,
        Outcome::CleanedUp("cleaned")
    );
    assert_eq!(cleanups.load(Ordering::SeqCst), 1);
    assert!(
        api.get_opt("guarded").await?.is_none(),
        "deleted once released"
    );
    Ok(())
}

#[tokio::test]
async fn finalizer_writes_from_a_stale_object_keep_what_others_wrote_meanwhile()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let stale = config_map(&env, "shared").await?;
    let other = json!({"metadata": {"finalizers": ["other.dev/a"]}});
    api.patch("shared", &PatchParams::default(), &Patch::Merge(&other))
        .await?;

    let written = finalizer::add_finalizer(&api, &stale, FINALIZER).await?;
    assert_eq!(
        written.metadata.finalizers,
        Some(vec!["other.dev/a".to_string(), FINALIZER.to_string()])
    );
    append_finalizer(&env.client(), "shared", "other.dev/b").await?;
    let left = finalizer::remove_finalizer(&api, &written, FINALIZER)
        .await?
        .expect("the object lives");
    assert_eq!(
        left.metadata.finalizers,
        Some(vec!["other.dev/a".to_string(), "other.dev/b".to_string()])
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizer_writes_under_a_concurrent_conflicting_writer_lose_nothing() -> anyhow::Result<()>
{
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("contested".into());
    cm.metadata.finalizers = Some(vec!["seed.dev/x".into()]);
    let first = api.create(&PostParams::default(), &cm).await?;

    // Another writer appends its own finalizers as fast as it can.
    let writer = {
        let client = env.client();
        tokio::spawn(async move {
            for i in 0..40 {
                append_finalizer(&client, "contested", &format!("other.dev/f{i}")).await?;
            }
            anyhow::Ok(())
        })
    };
    // Meanwhile we add and remove ours, always starting from the object first read.
    for _ in 0..20 {
        finalizer::add_finalizer(&api, &first, FINALIZER).await?;
        finalizer::remove_finalizer(&api, &first, FINALIZER).await?;
    }
    finalizer::add_finalizer(&api, &first, FINALIZER).await?;
    writer.await??;

    let finalizers = api
        .get("contested")
        .await?
        .metadata
        .finalizers
        .unwrap_or_default();
    for i in 0..40 {
        let want = format!("other.dev/f{i}");
        assert!(
            finalizers.contains(&want),
            "{want} was lost: {finalizers:?}"
        );
    }
    assert!(finalizers.contains(&"seed.dev/x".to_string()));
    assert_eq!(finalizers.iter().filter(|f| *f == FINALIZER).count(), 1);
    assert_eq!(finalizers.len(), 42);
    Ok(())
}

fn deployment(name: &str) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}
            }
        }
    }))?)
}

#[tokio::test]
async fn the_status_writer_writes_nothing_when_the_status_is_unchanged() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let created = api
        .create(&PostParams::default(), &deployment("web")?)
        .await?;
    let writer = StatusWriter::new(api.clone());
    let status = DeploymentStatus {
        replicas: Some(1),
        ready_replicas: Some(1),
        observed_generation: created.metadata.generation,
        ..DeploymentStatus::default()
    };
    let StatusWrite::Written(written) = writer.write(&created, &status).await? else {
        panic!("a new status is written");
    };
    assert_eq!(written.status.as_ref(), Some(&status));
    let rv = written.metadata.resource_version.clone();

    assert_eq!(
        writer.write(&*written, &status).await?,
        StatusWrite::Unchanged
    );
    let fetched = api.get("web").await?;
    assert_eq!(fetched.metadata.resource_version, rv, "nothing was written");

    // A dropped field is removed on the server, not left behind by the merge patch.
    let fewer = DeploymentStatus {
        ready_replicas: None,
        ..status.clone()
    };
    let StatusWrite::Written(written) = writer.write(&fetched, &fewer).await? else {
        panic!("a changed status is written");
    };
    assert_ne!(written.metadata.resource_version, rv);
    assert_eq!(api.get("web").await?.status, Some(fewer));
    Ok(())
}

#[tokio::test]
async fn a_status_writer_with_a_precondition_refuses_to_write_from_a_stale_object()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let stale = api
        .create(&PostParams::default(), &deployment("web")?)
        .await?;
    let writer = StatusWriter::new(api.clone()).with_precondition();
    let one = DeploymentStatus {
        replicas: Some(1),
        ..DeploymentStatus::default()
    };
    writer.write(&stale, &one).await?;
    let two = DeploymentStatus {
        replicas: Some(2),
        ..DeploymentStatus::default()
    };
    let err = writer
        .write(&stale, &two)
        .await
        .expect_err("the object moved on");
    assert!(
        matches!(&err, kore_runtime::status::Error::Patch(kube::Error::Api(s)) if s.code == 409),
        "{err:?}"
    );
    assert_eq!(api.get("web").await?.status, Some(one));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_repeat_after_the_series_window_starts_a_new_event() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let cm = config_map(&env, "subject").await?;
    let recorder = Recorder::new(env.client(), Reporter::new("kore.dev/test"));
    recorder
        .publish(&failed_sync("boom"), &cm.object_ref(&()))
        .await?;
    tokio::time::advance(kore_runtime::events::SERIES_WINDOW / 2).await;
    recorder
        .publish(&failed_sync("boom"), &cm.object_ref(&()))
        .await?;
    tokio::time::advance(kore_runtime::events::SERIES_WINDOW + std::time::Duration::from_secs(1))
        .await;
    recorder
        .publish(&failed_sync("boom"), &cm.object_ref(&()))
        .await?;
    let events: Api<KubeEvent> = Api::namespaced(env.client(), "default");
    let mut counts: Vec<Option<i32>> = events
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|e| e.series.as_ref().map(|s| s.count))
        .collect();
    counts.sort();
    assert_eq!(counts, [None, Some(2)]);
    Ok(())
}

#[tokio::test]
async fn finalize_does_nothing_for_a_deleting_object_without_its_finalizer() -> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("held".into());
    cm.metadata.finalizers = Some(vec!["other.dev/keep".into()]);
    api.create(&PostParams::default(), &cm).await?;
    api.delete("held", &DeleteParams::default()).await?;
    let deleting = api.get("held").await?;
    let ran = AtomicUsize::new(0);
    let outcome = finalizer::finalize(&api, FINALIZER, Arc::new(deleting), |_| async {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok::<_, CleanupFailed>(())
    })
    .await?;
    assert_eq!(outcome, Outcome::Skipped);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let still = api.get("held").await?;
    assert_eq!(
        still.metadata.finalizers,
        Some(vec!["other.dev/keep".to_string()])
    );
    Ok(())
}

#[tokio::test]
async fn a_single_attempt_finalizer_write_hands_a_conflict_back_and_reads_nothing()
-> anyhow::Result<()> {
    let env = kore_testenv::TestEnv::start().await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let stale = config_map(&env, "raced").await?;
    api.patch(
        "raced",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["other.dev/x"]}})),
    )
    .await?;

    let err = finalizer::try_add_finalizer(&api, &stale, FINALIZER)
        .await
        .expect_err("a write from a stale object conflicts");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err}"
    );
    let fresh = api.get("raced").await?;
    assert_eq!(
        fresh.metadata.finalizers,
        Some(vec!["other.dev/x".to_owned()])
    );

    let written = finalizer::try_add_finalizer(&api, &fresh, FINALIZER).await?;
    assert_eq!(
        written.metadata.finalizers,
        Some(vec!["other.dev/x".to_owned(), FINALIZER.to_owned()])
    );
    let removed = finalizer::try_remove_finalizer(&api, &written, FINALIZER).await?;
    assert_eq!(
        removed.and_then(|cm| cm.metadata.finalizers),
        Some(vec!["other.dev/x".to_owned()])
    );
    Ok(())
}
