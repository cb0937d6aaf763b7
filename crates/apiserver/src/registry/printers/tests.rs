//! Tests of the printers: every kind's columns and cells.

use super::*;
use serde_json::json;

/// 2024-05-01T12:00:00Z, the clock every test reads.
const NOW: i64 = 1_714_564_800;

const MINUTE: i64 = 60;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const YEAR: i64 = 365 * DAY;

/// Every kind with a dedicated printer, plus a few that fall back to the generic one.
const KINDS: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "ServiceAccount"),
    ("", "Event"),
    ("", "Pod"),
    ("", "Service"),
    ("coordination.k8s.io", "Lease"),
    ("events.k8s.io", "Event"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("example.com", "Widget"),
    ("example.com", "Pod"),
];

/// A timestamp `seconds` before [`NOW`], in RFC 3339.
fn ago(seconds: i64) -> String {
    let time = jiff::Timestamp::from_second(NOW - seconds).expect("in range");
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `columns` and `cells` for one object, zipped by column name.
fn row(group: &str, kind: &str, obj: &Value) -> Vec<(&'static str, Value)> {
    let columns = columns(group, kind);
    let cells = cells(group, kind, obj, NOW);
    assert_eq!(columns.len(), cells.len(), "{group}/{kind}");
    columns.iter().map(|c| c.name).zip(cells).collect()
}

/// The cell under `column` in a row.
fn cell(row: &[(&str, Value)], column: &str) -> Value {
    row.iter()
        .find(|(name, _)| *name == column)
        .map(|(_, value)| value.clone())
        .unwrap_or_else(|| panic!("no column {column}"))
}

fn names(group: &str, kind: &str) -> Vec<(&'static str, u8)> {
    columns(group, kind)
        .iter()
        .map(|c| (c.name, c.priority))
        .collect()
}

#[test]
fn human_duration_counts_seconds_below_two_minutes() {
    assert_eq!(human_duration(0), "0s");
    assert_eq!(human_duration(5), "5s");
    assert_eq!(human_duration(59), "59s");
    assert_eq!(human_duration(60), "60s");
    assert_eq!(human_duration(119), "119s");
}

#[test]
fn human_duration_adds_seconds_to_minutes_below_ten_minutes() {
    assert_eq!(human_duration(2 * MINUTE), "2m");
    assert_eq!(human_duration(3 * MINUTE + 20), "3m20s");
    assert_eq!(human_duration(9 * MINUTE + 59), "9m59s");
}

#[test]
fn human_duration_counts_minutes_below_three_hours() {
    assert_eq!(human_duration(10 * MINUTE), "10m");
    assert_eq!(human_duration(10 * MINUTE + 59), "10m");
    assert_eq!(human_duration(2 * HOUR + 59 * MINUTE), "179m");
    assert_eq!(human_duration(3 * HOUR - 1), "179m");
}

#[test]
fn human_duration_adds_minutes_to_hours_below_eight_hours() {
    assert_eq!(human_duration(3 * HOUR), "3h");
    assert_eq!(human_duration(3 * HOUR + 59), "3h");
    assert_eq!(human_duration(4 * HOUR + 5 * MINUTE), "4h5m");
    assert_eq!(human_duration(7 * HOUR + 59 * MINUTE), "7h59m");
}

#[test]
fn human_duration_counts_hours_below_two_days() {
    assert_eq!(human_duration(8 * HOUR), "8h");
    assert_eq!(human_duration(8 * HOUR + 30 * MINUTE), "8h");
    assert_eq!(human_duration(47 * HOUR), "47h");
    assert_eq!(human_duration(48 * HOUR - 1), "47h");
}

#[test]
fn human_duration_adds_hours_to_days_below_eight_days() {
    assert_eq!(human_duration(2 * DAY), "2d");
    assert_eq!(human_duration(2 * DAY + HOUR), "2d1h");
    assert_eq!(human_duration(7 * DAY + 23 * HOUR), "7d23h");
    assert_eq!(human_duration(8 * DAY - 1), "7d23h");
}

#[test]
fn human_duration_counts_days_below_two_years() {
    assert_eq!(human_duration(8 * DAY), "8d");
    assert_eq!(human_duration(8 * DAY + 23 * HOUR), "8d");
    assert_eq!(human_duration(400 * DAY), "400d");
    assert_eq!(human_duration(2 * YEAR - 1), "729d");
}

#[test]
fn human_duration_adds_days_to_years_below_eight_years() {
    assert_eq!(human_duration(2 * YEAR), "2y");
    assert_eq!(human_duration(2 * YEAR + DAY), "2y1d");
    assert_eq!(human_duration(5 * YEAR + 100 * DAY), "5y100d");
    assert_eq!(human_duration(8 * YEAR - 1), "7y364d");
}

#[test]
fn human_duration_counts_years_from_eight_years() {
    assert_eq!(human_duration(8 * YEAR), "8y");
    assert_eq!(human_duration(8 * YEAR + 200 * DAY), "8y");
    assert_eq!(human_duration(120 * YEAR), "120y");
    assert_eq!(human_duration(i64::MAX), format!("{}y", i64::MAX / YEAR));
}

#[test]
fn human_duration_forgives_one_second_of_clock_skew_only() {
    assert_eq!(human_duration(-1), "0s");
    assert_eq!(human_duration(-2), "<invalid>");
    assert_eq!(human_duration(i64::MIN), "<invalid>");
}

#[test]
fn age_is_unknown_without_a_parseable_timestamp() {
    assert_eq!(age(None, NOW), "<unknown>");
    assert_eq!(age(Some(""), NOW), "<unknown>");
    assert_eq!(age(Some("yesterday"), NOW), "<unknown>");
    assert_eq!(age(Some("2024-05-01T11:00:00"), NOW), "<unknown>");
}

#[test]
fn age_measures_whole_seconds_against_the_given_clock() {
    assert_eq!(age(Some("2024-05-01T11:56:40Z"), NOW), "3m20s");
    assert_eq!(age(Some("2024-05-01T13:56:40+02:00"), NOW), "3m20s");
    // MicroTime: 9.5 s ago truncates to 9 s; 1.5 s ahead is tolerated skew; 2.5 s is not.
    assert_eq!(age(Some("2024-05-01T11:59:50.500000Z"), NOW), "9s");
    assert_eq!(age(Some("2024-05-01T12:00:01.500000Z"), NOW), "0s");
    assert_eq!(age(Some("2024-05-01T12:00:02.500000Z"), NOW), "<invalid>");
    // Years are 365 days: two calendar years spanning 29 February are 731 days.
    assert_eq!(age(Some("2022-05-01T12:00:00Z"), NOW), "2y1d");
    assert_eq!(age(Some("2022-05-02T12:00:00Z"), NOW), "2y");
}

#[test]
fn a_deployment_row_shows_replicas_containers_and_selector() {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ago(5 * MINUTE)},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web", "tier": "front"},
                "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                    {"key": "zone", "operator": "NotIn", "values": ["b"]},
                    {"key": "managed", "operator": "Exists"},
                    {"key": "legacy", "operator": "DoesNotExist"}
                ]
            },
            "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.27"},
                {"name": "sidecar", "image": "busybox"}
            ]}}
        },
        "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}
    });
    let cells = cells("apps", "Deployment", &deployment, NOW);
    assert_eq!(
        cells,
        vec![
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(1),
            json!("5m"),
            json!("nginx,sidecar"),
            json!("nginx:1.27,busybox"),
            json!("app=web,env in (canary,prod),!legacy,managed,tier=front,zone notin (b)"),
        ]
    );
    assert_eq!(
        names("apps", "Deployment"),
        [
            ("Name", 0),
            ("Ready", 0),
            ("Up-to-date", 0),
            ("Available", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1)
        ]
    );
}

#[test]
fn a_fresh_deployment_without_status_reads_zero_ready() {
    let deployment = json!({
        "metadata": {"name": "web", "creationTimestamp": ago(30)},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
        "status": {}
    });
    let row = row("apps", "Deployment", &deployment);
    assert_eq!(cell(&row, "Ready"), json!("0/1"));
    assert_eq!(cell(&row, "Up-to-date"), json!(0));
    assert_eq!(cell(&row, "Available"), json!(0));
    assert_eq!(cell(&row, "Age"), json!("30s"));
    assert_eq!(cell(&row, "Selector"), json!("app=web"));
}

#[test]
fn selectors_render_empty_or_malformed_the_way_each_printer_does() {
    let with_selector = |selector: Value| json!({"spec": {"selector": selector}});
    let selector_of = |kind: &str, obj: &Value| cell(&row("apps", kind, obj), "Selector");

    let empty = with_selector(json!({}));
    assert_eq!(selector_of("Deployment", &empty), json!(""));
    assert_eq!(selector_of("ReplicaSet", &empty), json!("<none>"));
    assert_eq!(selector_of("Deployment", &json!({})), json!(""));

    let bad = with_selector(json!({"matchExpressions": [{"key": "a", "operator": "In"}]}));
    assert_eq!(selector_of("Deployment", &bad), json!("<invalid>"));
    assert_eq!(selector_of("ReplicaSet", &bad), json!("<error>"));

    let unknown = with_selector(json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]}));
    assert_eq!(selector_of("Deployment", &unknown), json!("<invalid>"));
    let exists_with_values = with_selector(
        json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
    );
    assert_eq!(
        selector_of("Deployment", &exists_with_values),
        json!("<invalid>")
    );
}

#[test]
fn a_replica_set_row_shows_desired_current_and_ready() {
    let replica_set = json!({
        "metadata": {"name": "web-7d4b9c", "creationTimestamp": ago(2 * DAY + 3 * HOUR)},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d4b9c"}},
                 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
        "status": {"replicas": 2, "readyReplicas": 1}
    });
    assert_eq!(
        cells("apps", "ReplicaSet", &replica_set, NOW),
        vec![
            json!("web-7d4b9c"),
            json!(3),
            json!(2),
            json!(1),
            json!("2d3h"),
            json!("nginx"),
            json!("nginx"),
            json!("app=web,pod-template-hash=7d4b9c"),
        ]
    );
}

#[test]
fn a_pending_pod_without_statuses_reads_zero_ready() {
    let pod = json!({
        "metadata": {"name": "web-1", "creationTimestamp": ago(10)},
        "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"}
    });
    assert_eq!(
        cells("", "Pod", &pod, NOW),
        vec![
            json!("web-1"),
            json!("0/2"),
            json!("Pending"),
            json!("0"),
            json!("10s"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
        ]
    );
}

#[test]
fn a_pod_with_restarts_sums_them_and_says_when_the_last_one_was() {
    let pod = json!({
        "metadata": {"name": "api-0", "creationTimestamp": ago(3 * HOUR)},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "app", "image": "app"}, {"name": "proxy", "image": "envoy"}],
            "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.9",
            "podIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}],
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "example.com/lb", "status": "True"},
                {"type": "example.com/dns", "status": "False"}
            ],
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(20 * MINUTE)}}},
                {"name": "proxy", "ready": false, "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 137, "finishedAt": ago(4 * MINUTE)}}}
            ]
        }
    });
    assert_eq!(
        cells("", "Pod", &pod, NOW),
        vec![
            json!("api-0"),
            json!("1/2"),
            json!("CrashLoopBackOff"),
            json!("5 (4m ago)"),
            json!("3h"),
            json!("10.0.0.9"),
            json!("node-a"),
            json!("<none>"),
            json!("1/2"),
        ]
    );
}

#[test]
fn a_pod_restart_count_without_a_termination_time_is_a_bare_number() {
    let pod = json!({
        "spec": {"containers": [{"name": "app"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 4, "state": {"running": {}}}
        ]}
    });
    let row = row("", "Pod", &pod);
    assert_eq!(cell(&row, "Restarts"), json!("4"));
    assert_eq!(cell(&row, "Ready"), json!("1/1"));
    assert_eq!(cell(&row, "Status"), json!("Running"));
    assert_eq!(cell(&row, "Age"), json!("<unknown>"));
}

#[test]
fn a_pod_status_follows_init_containers_and_terminations() {
    let initializing = json!({
        "spec": {"initContainers": [{"name": "migrate"}, {"name": "seed"}],
                 "containers": [{"name": "app"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "migrate", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "seed", "restartCount": 1, "state": {"running": {}}}
        ]}
    });
    let row1 = row("", "Pod", &initializing);
    assert_eq!(cell(&row1, "Status"), json!("Init:1/2"));
    assert_eq!(cell(&row1, "Restarts"), json!("1"));

    let failed_init = json!({
        "spec": {"initContainers": [{"name": "migrate"}], "containers": [{"name": "app"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "migrate", "state": {"terminated": {"exitCode": 2}}}
        ]}
    });
    assert_eq!(
        cell(&row("", "Pod", &failed_init), "Status"),
        json!("Init:ExitCode:2")
    );

    let sidecar = json!({
        "spec": {"initContainers": [{"name": "mesh", "restartPolicy": "Always"}],
                 "containers": [{"name": "app"}]},
        "status": {"phase": "Running",
            "initContainerStatuses": [{"name": "mesh", "started": true, "ready": true,
                                       "restartCount": 1, "state": {"running": {}}}],
            "containerStatuses": [{"name": "app", "ready": true, "state": {"running": {}}}]}
    });
    let row3 = row("", "Pod", &sidecar);
    assert_eq!(cell(&row3, "Ready"), json!("2/2"));
    assert_eq!(cell(&row3, "Status"), json!("Running"));
    assert_eq!(cell(&row3, "Restarts"), json!("1"));

    let completed = json!({
        "spec": {"containers": [{"name": "job"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "job", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]}
    });
    assert_eq!(
        cell(&row("", "Pod", &completed), "Status"),
        json!("Completed")
    );

    let killed = json!({
        "spec": {"containers": [{"name": "app"}]},
        "status": {"phase": "Failed", "containerStatuses": [
            {"name": "app", "state": {"terminated": {"exitCode": 137, "signal": 9}}}
        ]}
    });
    assert_eq!(cell(&row("", "Pod", &killed), "Status"), json!("Signal:9"));
}

#[test]
fn a_pod_being_deleted_reads_terminating_unless_finished() {
    let pod = |phase: &str| {
        json!({
            "metadata": {"name": "p", "deletionTimestamp": ago(5)},
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": phase}
        })
    };
    assert_eq!(
        cell(&row("", "Pod", &pod("Running")), "Status"),
        json!("Terminating")
    );
    assert_eq!(
        cell(&row("", "Pod", &pod("Succeeded")), "Status"),
        json!("Succeeded")
    );

    let evicted = json!({"status": {"phase": "Failed", "reason": "Evicted"}});
    assert_eq!(cell(&row("", "Pod", &evicted), "Status"), json!("Evicted"));
    let lost = json!({"metadata": {"deletionTimestamp": ago(5)},
                      "status": {"phase": "Running", "reason": "NodeLost"}});
    assert_eq!(cell(&row("", "Pod", &lost), "Status"), json!("Unknown"));
}

#[test]
fn a_cluster_ip_service_row_shows_ports_and_selector() {
    let svc = json!({
        "metadata": {"name": "web", "creationTimestamp": ago(90)},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                 "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                 "selector": {"tier": "front", "app": "web"}}
    });
    assert_eq!(
        cells("", "Service", &svc, NOW),
        vec![
            json!("web"),
            json!("ClusterIP"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80/TCP,53/UDP"),
            json!("90s"),
            json!("app=web,tier=front"),
        ]
    );
    assert_eq!(
        names("", "Service"),
        [
            ("Name", 0),
            ("Type", 0),
            ("Cluster-IP", 0),
            ("External-IP", 0),
            ("Port(s)", 0),
            ("Age", 0),
            ("Selector", 1)
        ]
    );
}

#[test]
fn a_node_port_service_shows_node_ports_and_external_ips() {
    let svc = json!({
        "metadata": {"name": "edge"},
        "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.20"],
                 "externalIPs": ["192.0.2.1", "192.0.2.2"],
                 "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                           {"port": 443, "nodePort": 30443}]}
    });
    let row = row("", "Service", &svc);
    assert_eq!(cell(&row, "External-IP"), json!("192.0.2.1,192.0.2.2"));
    assert_eq!(cell(&row, "Port(s)"), json!("80:30080/TCP,443:30443/TCP"));
    assert_eq!(cell(&row, "Selector"), json!("<none>"));
}

#[test]
fn a_load_balancer_service_is_pending_until_it_has_ingress() {
    let pending = json!({
        "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.30"],
                 "ports": [{"port": 443, "nodePort": 31443, "protocol": "TCP"}]},
        "status": {"loadBalancer": {}}
    });
    assert_eq!(
        cell(&row("", "Service", &pending), "External-IP"),
        json!("<pending>")
    );

    let ready = json!({
        "spec": {"type": "LoadBalancer", "externalIPs": ["192.0.2.9"]},
        "status": {"loadBalancer": {"ingress": [
            {"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}, {"ip": "203.0.113.7"}
        ]}}
    });
    assert_eq!(
        cell(&row("", "Service", &ready), "External-IP"),
        json!("203.0.113.7,lb.example.com,192.0.2.9")
    );
    let only_external = json!({"spec": {"type": "LoadBalancer", "externalIPs": ["192.0.2.9"]}});
    assert_eq!(
        cell(&row("", "Service", &only_external), "External-IP"),
        json!("192.0.2.9")
    );
}

#[test]
fn external_name_and_headless_services_show_what_they_point_at() {
    let external = json!({
        "spec": {"type": "ExternalName", "externalName": "db.example.com"}
    });
    let row1 = row("", "Service", &external);
    assert_eq!(cell(&row1, "Type"), json!("ExternalName"));
    assert_eq!(cell(&row1, "Cluster-IP"), json!("<none>"));
    assert_eq!(cell(&row1, "External-IP"), json!("db.example.com"));
    assert_eq!(cell(&row1, "Port(s)"), json!("<none>"));

    let headless = json!({
        "spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"],
                 "ports": [{"port": 5432, "protocol": "TCP"}]}
    });
    assert_eq!(
        cell(&row("", "Service", &headless), "Cluster-IP"),
        json!("None")
    );

    let untyped = json!({"spec": {}});
    assert_eq!(
        cell(&row("", "Service", &untyped), "External-IP"),
        json!("<unknown>")
    );
}

#[test]
fn a_secret_row_shows_its_type_and_counts_data_keys() {
    let secret = json!({
        "metadata": {"name": "tls", "creationTimestamp": ago(7 * DAY + 23 * HOUR)},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}
    });
    assert_eq!(
        cells("", "Secret", &secret, NOW),
        vec![
            json!("tls"),
            json!("kubernetes.io/tls"),
            json!(2),
            json!("7d23h")
        ]
    );
}

#[test]
fn a_config_map_counts_data_and_binary_data_keys() {
    let config_map = json!({
        "metadata": {"name": "demo", "creationTimestamp": ago(5 * MINUTE)},
        "data": {"a": "1", "b": "2"},
        "binaryData": {"logo.png": "iVBORw0KGgo="}
    });
    assert_eq!(
        cells("", "ConfigMap", &config_map, NOW),
        vec![json!("demo"), json!(3), json!("5m")]
    );
}

#[test]
fn namespaces_service_accounts_and_leases_show_their_one_field() {
    let namespace = json!({"metadata": {"name": "team-a", "creationTimestamp": ago(400 * DAY)},
                           "status": {"phase": "Terminating"}});
    assert_eq!(
        cells("", "Namespace", &namespace, NOW),
        vec![json!("team-a"), json!("Terminating"), json!("400d")]
    );

    let account = json!({"metadata": {"name": "builder"},
                         "secrets": [{"name": "builder-token"}, {"name": "registry"}]});
    assert_eq!(
        cell(&row("", "ServiceAccount", &account), "Secrets"),
        json!(2)
    );

    let held = json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "pod-a_1234"}});
    let released = json!({"metadata": {"name": "leader"}, "spec": {}});
    assert_eq!(
        cell(&row("coordination.k8s.io", "Lease", &held), "Holder"),
        json!("pod-a_1234")
    );
    assert_eq!(
        cell(&row("coordination.k8s.io", "Lease", &released), "Holder"),
        json!("")
    );
    assert_eq!(names("", "Lease"), [("Name", 0), ("Created At", 0)]);
}

#[test]
fn a_core_event_row_shows_what_happened_to_which_object() {
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web-1.17c9a0b3d5e2f4a1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{nginx}"},
        "reason": "BackOff", "type": "Warning",
        "message": "Back-off restarting failed container\n",
        "source": {"component": "kubelet", "host": "node-a"},
        "firstTimestamp": ago(HOUR), "lastTimestamp": ago(2 * MINUTE), "count": 14
    });
    assert_eq!(
        cells("", "Event", &event, NOW),
        vec![
            json!("2m"),
            json!("Warning"),
            json!("BackOff"),
            json!("pod/web-1"),
            json!("spec.containers{nginx}"),
            json!("kubelet, node-a"),
            json!("Back-off restarting failed container"),
            json!("60m"),
            json!(14),
            json!("web-1.17c9a0b3d5e2f4a1"),
        ]
    );
    assert_eq!(
        names("", "Event"),
        [
            ("Last Seen", 0),
            ("Type", 0),
            ("Reason", 0),
            ("Object", 0),
            ("Subobject", 1),
            ("Source", 1),
            ("Message", 0),
            ("First Seen", 1),
            ("Count", 1),
            ("Name", 1)
        ]
    );
}

#[test]
fn a_core_event_from_the_new_api_falls_back_to_event_time_and_reporter() {
    let event = json!({
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Deployment"},
        "reason": "ScalingReplicaSet", "type": "Normal", "message": "Scaled up",
        "eventTime": "2024-05-01T11:59:30.123456Z",
        "reportingComponent": "deployment-controller",
        "reportingInstance": "cm-1"
    });
    let row = row("", "Event", &event);
    assert_eq!(cell(&row, "Last Seen"), json!("29s"));
    assert_eq!(cell(&row, "First Seen"), json!("29s"));
    assert_eq!(cell(&row, "Object"), json!("deployment"));
    assert_eq!(cell(&row, "Source"), json!("deployment-controller, cm-1"));
    assert_eq!(cell(&row, "Count"), json!(1));
}

#[test]
fn an_events_k8s_io_event_reads_its_own_field_names() {
    let event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.1"},
        "eventTime": ago(3 * HOUR),
        "regarding": {"kind": "Deployment", "name": "web", "fieldPath": ""},
        "note": "  Scaled up replica set web-7d4b9c to 3 ",
        "reason": "ScalingReplicaSet", "type": "Normal", "action": "Scale",
        "reportingController": "deployment-controller",
        "reportingInstance": "deployment-controller-node-a",
        "series": {"count": 4, "lastObservedTime": ago(10 * MINUTE)}
    });
    assert_eq!(
        cells("events.k8s.io", "Event", &event, NOW),
        vec![
            json!("10m"),
            json!("Normal"),
            json!("ScalingReplicaSet"),
            json!("deployment/web"),
            json!(""),
            json!("deployment-controller, deployment-controller-node-a"),
            json!("Scaled up replica set web-7d4b9c to 3"),
            json!("3h"),
            json!(4),
            json!("web.1"),
        ]
    );

    let legacy = json!({
        "regarding": {"kind": "Pod", "name": "p"},
        "deprecatedSource": {"component": "kubelet"},
        "deprecatedFirstTimestamp": ago(2 * DAY),
        "deprecatedLastTimestamp": ago(HOUR),
        "deprecatedCount": 7,
        "reportingController": "ignored-because-source-wins"
    });
    let row = row("events.k8s.io", "Event", &legacy);
    assert_eq!(cell(&row, "Last Seen"), json!("60m"));
    assert_eq!(cell(&row, "First Seen"), json!("2d"));
    assert_eq!(cell(&row, "Count"), json!(7));
    assert_eq!(cell(&row, "Source"), json!("kubelet"));
}

#[test]
fn rbac_objects_get_name_and_created_at() {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "view", "creationTimestamp": "2024-04-30T10:00:00Z"},
        "rules": []
    });
    let columns = columns("rbac.authorization.k8s.io", "ClusterRole");
    assert_eq!(
        serde_json::to_value(&columns).expect("serializes"),
        json!([
            {"name": "Name", "type": "string", "format": "name",
             "description": "Name of the object, unique within its namespace.", "priority": 0},
            {"name": "Created At", "type": "date", "format": "",
             "description": "When the object was created (RFC 3339, UTC).", "priority": 0}
        ])
    );
    assert_eq!(
        cells("rbac.authorization.k8s.io", "ClusterRole", &role, NOW),
        vec![json!("view"), json!("2024-04-30T10:00:00Z")]
    );
}

#[test]
fn created_at_is_normalised_to_utc_and_never_missing() {
    let shifted =
        json!({"metadata": {"name": "x", "creationTimestamp": "2024-04-30T12:00:00.25+02:00"}});
    assert_eq!(
        cells("example.com", "Widget", &shifted, NOW),
        vec![json!("x"), json!("2024-04-30T10:00:00Z")]
    );
    let garbled = json!({"metadata": {"creationTimestamp": "not a time"}});
    assert_eq!(
        cells("example.com", "Widget", &garbled, NOW)[1],
        json!("not a time")
    );
    assert_eq!(
        cells("example.com", "Widget", &json!({}), NOW),
        vec![json!(""), json!("0001-01-01T00:00:00Z")]
    );
}

#[test]
fn kinds_are_matched_by_group_as_well_as_name() {
    assert_eq!(
        names("example.com", "Pod"),
        [("Name", 0), ("Created At", 0)]
    );
    assert_eq!(names("apps", "Pod"), [("Name", 0), ("Created At", 0)]);
    assert_eq!(names("", "Deployment"), [("Name", 0), ("Created At", 0)]);
    assert_eq!(names("events.k8s.io", "Event"), names("", "Event"));
}

#[test]
fn columns_and_cells_agree_for_every_kind_even_on_empty_or_odd_objects() {
    let odd_objects = [
        json!({}),
        json!(null),
        json!([]),
        json!("text"),
        json!({"metadata": null, "spec": null, "status": null}),
        json!({"metadata": 5, "spec": "x", "status": [], "data": [], "secrets": {}}),
        json!({"spec": {"containers": [null, 1, {"name": 2}], "ports": [{}],
                        "selector": {"matchLabels": "x"}, "readinessGates": [{}]},
               "status": {"containerStatuses": [{}, null], "initContainerStatuses": [{"state": {}}],
                          "loadBalancer": {"ingress": [{}]}},
               "series": {}, "involvedObject": {}, "regarding": {}}),
    ];
    for (group, kind) in KINDS {
        let columns = columns(group, kind);
        assert!(!columns.is_empty());
        for obj in &odd_objects {
            let cells = cells(group, kind, obj, NOW);
            assert_eq!(cells.len(), columns.len(), "{group}/{kind} on {obj}");
        }
    }
}

#[test]
fn every_kind_has_exactly_one_name_column_and_typed_cells() {
    let full = json!({
        "metadata": {"name": "n", "creationTimestamp": ago(1)},
        "spec": {"replicas": 2, "containers": [{"name": "c"}], "type": "ClusterIP"},
        "status": {"replicas": 1},
        "data": {"k": "v"},
        "secrets": [],
        "count": 2
    });
    for (group, kind) in KINDS {
        let columns = columns(group, kind);
        let named = columns.iter().filter(|c| c.format == "name").count();
        assert_eq!(named, 1, "{group}/{kind}");
        for obj in [json!({}), full.clone()] {
            for (column, cell) in columns.iter().zip(cells(group, kind, &obj, NOW)) {
                let expected = match column.kind {
                    "integer" => cell.is_i64(),
                    "string" | "date" => cell.is_string(),
                    other => panic!("unexpected column type {other}"),
                };
                assert!(expected, "{group}/{kind} {}: {cell}", column.name);
                assert!(column.priority <= 1);
                assert!(!column.description.is_empty());
            }
        }
    }
}

#[test]
fn role_bindings_show_the_role_and_their_subjects() {
    let binding = json!({
        "metadata": {"name": "readers", "creationTimestamp": ago(90)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"},
            {"kind": "User", "name": "bob"}
        ]
    });
    let names: Vec<&str> = columns("rbac.authorization.k8s.io", "RoleBinding")
        .iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        names,
        ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
    );
    assert_eq!(
        cells(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            &binding,
            NOW
        ),
        [
            json!("readers"),
            json!("ClusterRole/view"),
            json!("90s"),
            json!("alice, bob"),
            json!("devs"),
            json!("ops/bot")
        ]
    );
}
