//! certificates.k8s.io/v1 CertificateSigningRequest `approval` and `status` against an
//! in-process kore-apiserver: decisions only through `approval`, never taken back.

use crate::common::assert_invalid;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn csr(name: &str) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                 "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["client auth"]}
    }))
    .expect("valid CSR")
}

#[tokio::test]
async fn csr_approval_is_the_only_way_to_decide() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    api.create(&PostParams::default(), &csr("alice"))
        .await
        .expect("create");

    // Status cannot approve.
    let approve = json!({"status": {"conditions": [{"type": "Approved", "status": "True",
        "reason": "ByTest", "message": "ok"}]}});
    let err = api
        .patch_status("alice", &PatchParams::default(), &Patch::Merge(&approve))
        .await
        .expect_err("status cannot approve");
    assert_invalid(
        err,
        "status.conditions",
        "may not add a condition of type \"Approved\"",
    );

    // Approval can, and changes nothing else.
    let mut with_label = approve.clone();
    with_label["metadata"] = json!({"labels": {"x": "y"}});
    let approved = api
        .patch_subresource(
            "approval",
            "alice",
            &PatchParams::default(),
            &Patch::Merge(&with_label),
        )
        .await
        .expect("approve");
    assert!(
        approved.metadata.labels.is_none(),
        "labels do not change through approval"
    );
    let conditions = approved
        .status
        .expect("status")
        .conditions
        .expect("conditions");
    assert_eq!(conditions[0].type_, "Approved");
    assert!(conditions[0].last_update_time.is_some());

    // Denied beside Approved, or taking Approved back, is refused.
    let both = json!({"status": {"conditions": [
        {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}});
    let err = api
        .patch_subresource(
            "approval",
            "alice",
            &PatchParams::default(),
            &Patch::Merge(&both),
        )
        .await
        .expect_err("both");
    assert_invalid(err, "status.conditions", "mutually exclusive");
    let none = json!({"status": {"conditions": []}});
    let err = api
        .patch_subresource(
            "approval",
            "alice",
            &PatchParams::default(),
            &Patch::Merge(&none),
        )
        .await
        .expect_err("taken back");
    assert_invalid(
        err,
        "status.conditions",
        "may not remove a condition of type \"Approved\"",
    );
    let err = api
        .patch_subresource(
            "approval",
            "alice",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Approved", "status": "False"}]}}),
            ),
        )
        .await
        .expect_err("False");
    assert_invalid(err, "status.conditions[0].status", "Unsupported value");
}
