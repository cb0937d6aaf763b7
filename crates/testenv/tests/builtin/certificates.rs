//! certificates.k8s.io/v1 CertificateSigningRequest `approval` and `status` against an
//! in-process kore-apiserver: decisions only through `approval`, never taken back.

use crate::common::{assert_invalid, request_b64};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn csr(name: &str) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"request": request_b64(name),
                 "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["client auth"]}
    }))
    .expect("valid CSR")
}

/// What Kubernetes refuses when a request is created: each error alone, as a 422 naming its
/// field.
#[tokio::test]
async fn a_csr_is_checked_on_create_as_kubernetes_checks_it() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    let with = |name: &str, spec: serde_json::Value| -> CertificateSigningRequest {
        let mut csr = serde_json::to_value(csr(name)).expect("JSON");
        for (k, v) in spec.as_object().expect("an object") {
            csr["spec"][k] = v.clone();
        }
        serde_json::from_value(csr).expect("a CSR")
    };
    let pp = PostParams::default();
    // Not a request at all: a PEM header only.
    let header_only = with(
        "a",
        json!({"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K"}),
    );
    let err = api.create(&pp, &header_only).await.expect_err("refused");
    assert_invalid(
        err,
        "spec.request",
        "PEM block type must be CERTIFICATE REQUEST",
    );
    // Another key's signature: a request whose body was changed after signing.
    let mut tampered = with("b", json!({}));
    {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        // `ByteString` holds the decoded bytes: the PEM.
        let pem = String::from_utf8(tampered.spec.request.0.clone()).expect("utf-8");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let mut der = b64.decode(body).expect("der");
        let last = der.len() - 1;
        der[last] ^= 0x01;
        let text = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            b64.encode(der)
        );
        tampered.spec.request = k8s_openapi::ByteString(text.into_bytes());
    }
    let err = api.create(&pp, &tampered).await.expect_err("refused");
    assert_invalid(err, "spec.request", "signature");
    // One field wrong at a time: (name, the spec fields replaced, the cause's field, its text).
    let cases = [
        (
            "c",
            json!({"usages": []}),
            "spec.usages",
            "usages must be provided",
        ),
        (
            "d",
            json!({"usages": ["client auth", "flying"]}),
            "spec.usages[1]",
            "supported values",
        ),
        (
            "e",
            json!({"usages": ["client auth", "client auth"]}),
            "spec.usages[1]",
            "Duplicate value",
        ),
        (
            "f",
            json!({"signerName": "example"}),
            "spec.signerName",
            "example.com/signer-name",
        ),
        (
            "g",
            json!({"signerName": "example/name"}),
            "spec.signerName",
            "at least two segments",
        ),
        (
            "h",
            json!({"expirationSeconds": 599}),
            "spec.expirationSeconds",
            "less than 600 seconds",
        ),
    ];
    for (name, spec, field, text) in cases {
        let err = api.create(&pp, &with(name, spec)).await.expect_err(name);
        assert_invalid(err, field, text);
    }
    // A custom signer's well-formed request is accepted, and nothing refused was stored.
    api.create(
        &pp,
        &with("ok", json!({"signerName": "example.com/my-signer"})),
    )
    .await
    .expect("accepted");
    let names: Vec<String> = api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["ok"]);
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

// ---- Client certificates (x509 authentication) and CSR signing, over TLS ----

mod x509 {
    use std::time::Duration;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use k8s_openapi::api::core::v1::Namespace;
    use kore_apiserver::auth::kubeconfig::{Credential, kubeconfig_yaml_for};
    use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
    use kore_testenv::{TestEnv, wait_for};
    use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair,
    };
    use serde_json::json;

    use crate::common::api_error;

    const TIMEOUT: Duration = Duration::from_secs(60);

    /// A client of `env`'s socket authenticating with `cert_pem`/`key_pem` (and `token`, if
    /// given, as well).
    async fn client_with(
        env: &TestEnv,
        cert_pem: &str,
        key_pem: &str,
        token: Option<&str>,
    ) -> kube::Client {
        let endpoint = env.endpoint().expect("a socket");
        let mut yaml = kubeconfig_yaml_for(
            &endpoint.url,
            Some(env.server().certificate_authority().pem()),
            Credential::ClientCertificate { cert_pem, key_pem },
        );
        if let Some(token) = token {
            yaml = yaml.replace("  user:\n", &format!("  user:\n    token: \"{token}\"\n"));
        }
        client_of(&yaml).await
    }

    async fn client_of(yaml: &str) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).expect("kube reads it");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a config");
        kube::Client::try_from(config).expect("a client")
    }

    /// Who the server says `client` is: user name and groups.
    async fn whoami(client: &kube::Client) -> Result<(String, Vec<String>), kube::Error> {
        let review = Api::<SelfSubjectReview>::all(client.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await?;
        let info = review.status.and_then(|s| s.user_info).expect("user info");
        Ok((
            info.username.unwrap_or_default(),
            info.groups.unwrap_or_default(),
        ))
    }

    async fn status_of(result: Result<(String, Vec<String>), kube::Error>) -> u16 {
        match result {
            Ok(user) => panic!("authenticated as {user:?}"),
            Err(e) => api_error(e).code,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_certificate_kubeconfig_works_for_kube_and_kubectl() {
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let endpoint = env.endpoint().expect("a socket");
        let yaml = env
            .server()
            .client_certificate_kubeconfig(endpoint)
            .expect("a kubeconfig");
        let token = env.server().admin_token().expect("an admin token");
        assert!(
            !yaml.contains(token),
            "no token in a certificate kubeconfig"
        );
        assert!(yaml.contains("client-certificate-data") && yaml.contains("client-key-data"));

        let client = client_of(&yaml).await;
        let (name, groups) = whoami(&client).await.expect("authenticated");
        assert_eq!(name, "kubernetes-admin");
        assert_eq!(groups, ["system:masters", "system:authenticated"]);
        Api::<Namespace>::all(client)
            .list(&ListParams::default())
            .await
            .expect("an administrator lists namespaces");

        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("cert-kubeconfig");
        std::fs::write(&path, &yaml).expect("writes the kubeconfig");
        let kubectl = Kubectl::new(program, &path);
        let out = kubectl
            .ok(&["get", "namespace", "default", "-o", "name"])
            .await;
        assert_eq!(out.trim(), "namespace/default");
    }

    /// A client certificate for `cn` signed by `issuer`, valid from `from` to `to` (days from
    /// today).
    fn client_cert(cn: &str, issuer: &Issuer<'_, KeyPair>, from: i64, to: i64) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, cn);
        params.distinguished_name = name;
        params.is_ca = IsCa::ExplicitNoCa;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let today = time::OffsetDateTime::now_utc();
        params.not_before = today + time::Duration::days(from);
        params.not_after = today + time::Duration::days(to);
        let cert = params.signed_by(&key, issuer).expect("signs");
        (cert.pem(), key.serialize_pem())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_ca_or_an_expired_certificate_is_refused_unless_a_token_authenticates() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path();
        let env = TestEnv::builder()
            .tcp()
            .data_dir(dir)
            .start()
            .await
            .expect("start");
        let token = env
            .server()
            .admin_token()
            .expect("an admin token")
            .to_owned();

        // Another CA.
        let foreign_key = KeyPair::generate().expect("key");
        let mut foreign = CertificateParams::default();
        foreign.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        foreign
            .distinguished_name
            .push(DnType::CommonName, "not-kore");
        let foreign_ca = foreign.self_signed(&foreign_key).expect("a CA");
        let foreign_issuer =
            Issuer::from_ca_cert_der(foreign_ca.der(), foreign_key).expect("an issuer");
        let (cert, key) = client_cert("mallory", &foreign_issuer, -1, 1);
        let client = client_with(&env, &cert, &key, None).await;
        assert_eq!(status_of(whoami(&client).await).await, 401);
        // The same certificate beside a valid token: the token authenticates.
        let client = client_with(&env, &cert, &key, Some(&token)).await;
        let (name, _) = whoami(&client).await.expect("the token authenticates");
        assert_eq!(name, "kore-admin");

        // kore's own CA (its key is in the data directory), but expired.
        let ca_pem = std::fs::read_to_string(dir.join("ca.crt")).expect("ca.crt");
        let ca_key =
            KeyPair::from_pem(&std::fs::read_to_string(dir.join("ca.key")).expect("ca.key"))
                .expect("the CA key");
        let kore = Issuer::from_ca_cert_pem(&ca_pem, ca_key).expect("an issuer");
        let (cert, key) = client_cert("bob", &kore, -3, -1);
        let client = client_with(&env, &cert, &key, None).await;
        assert_eq!(status_of(whoami(&client).await).await, 401);

        // Valid, and beside the admin token: the certificate names the user (x509 comes first).
        let (cert, key) = client_cert("alice", &kore, -1, 1);
        let client = client_with(&env, &cert, &key, Some(&token)).await;
        let (name, groups) = whoami(&client).await.expect("authenticated");
        assert_eq!(name, "alice");
        assert_eq!(groups, ["system:authenticated"]);
        env.stop().await;
    }

    fn request_pem(key: &KeyPair, cn: &str, org: Option<&str>) -> String {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        if let Some(org) = org {
            name.push(DnType::OrganizationName, org);
        }
        name.push(DnType::CommonName, cn);
        params.distinguished_name = name;
        params
            .serialize_request(key)
            .expect("a request")
            .pem()
            .expect("PEM")
    }

    fn csr(name: &str, request: &str, signer: &str) -> CertificateSigningRequest {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"request": STANDARD.encode(request),
                     "signerName": signer,
                     "expirationSeconds": 3600,
                     "usages": ["client auth", "digital signature"]}
        }))
        .expect("valid CSR")
    }

    async fn approve(api: &Api<CertificateSigningRequest>, name: &str) {
        let approve = json!({"status": {"conditions": [{"type": "Approved", "status": "True",
            "reason": "ByTest", "message": "ok"}]}});
        api.patch_subresource(
            "approval",
            name,
            &PatchParams::default(),
            &Patch::Merge(&approve),
        )
        .await
        .expect("approve");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approved_csr_is_signed_and_its_certificate_authenticates() {
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let api: Api<CertificateSigningRequest> = Api::all(env.client());
        let key = KeyPair::generate().expect("key");
        let request = request_pem(&key, "carol", Some("qa"));
        api.create(
            &PostParams::default(),
            &csr("carol", &request, "kubernetes.io/kube-apiserver-client"),
        )
        .await
        .expect("create");
        approve(&api, "carol").await;
        let cert = wait_for(TIMEOUT, || async {
            let csr = api.get("carol").await.ok()?;
            csr.status?.certificate.map(|c| c.0)
        })
        .await
        .expect("the certificate is issued");
        let cert_pem = String::from_utf8(cert).expect("PEM text");
        assert!(cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));

        let client = client_with(&env, &cert_pem, &key.serialize_pem(), None).await;
        let (name, groups) = whoami(&client).await.expect("authenticated");
        assert_eq!(name, "carol");
        assert_eq!(groups, ["qa", "system:authenticated"]);
        // An ordinary user: RBAC decides, and carol has no grant.
        let err = Api::<Namespace>::all(client)
            .list(&ListParams::default())
            .await
            .expect_err("no grant");
        assert_eq!(api_error(err).code, 403);
    }

    #[tokio::test]
    async fn a_csr_that_breaks_its_signer_rules_fails() {
        let env = TestEnv::start().await.expect("start");
        let api: Api<CertificateSigningRequest> = Api::all(env.client());
        let key = KeyPair::generate().expect("key");
        let request = request_pem(&key, "carol", None);
        api.create(
            &PostParams::default(),
            &csr(
                "kubelet",
                &request,
                "kubernetes.io/kube-apiserver-client-kubelet",
            ),
        )
        .await
        .expect("create");
        approve(&api, "kubelet").await;
        let failed = wait_for(TIMEOUT, || async {
            let csr = api.get("kubelet").await.ok()?;
            let conditions = csr.status?.conditions?;
            conditions.into_iter().find(|c| c.type_ == "Failed")
        })
        .await
        .expect("a Failed condition");
        assert_eq!(failed.status, "True");
        assert_eq!(failed.reason.as_deref(), Some("SignerValidationFailure"));
        assert_eq!(
            failed.message.as_deref(),
            Some("subject organization is not system:nodes")
        );
        let csr = api.get("kubelet").await.expect("get");
        assert!(csr.status.and_then(|s| s.certificate).is_none());
    }
}
