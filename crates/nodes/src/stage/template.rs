//! Status templates: Go `text/template` (through the `gtmpl` crate) rendering YAML, with the
//! functions kwok registers.
//!
//! The object is the template's `.` (as JSON, as kwok hands it over). The functions:
//!
//! | function | answers |
//! |---|---|
//! | `Now` | the time, RFC 3339 (to the second, as the API server keeps it) |
//! | `StartTime` | when this process started |
//! | `Quote x` | `x` as a JSON string (a non-string's JSON text, quoted) |
//! | `YAML x [indent]` | `x` as YAML, every line indented by 2·indent spaces |
//! | `Version` | kore's version |
//! | `NodeName`, `NodeIP`, `NodeIPWith name`, `NodeIPsWith name`, `NodePort` | the node's name, InternalIP, `[InternalIP]`, kubelet port 10250 |
//! | `PodIP`, `PodIPWith …`, `PodIPsWith …` | the pod's IP (its own, else one from its node's podCIDR), `[IP]` |
//! | `NodeConditions` | a simulated kubelet's node conditions (Ready True, the three pressures False) |
//! | `dict k v …`, `add a b`, `sub a b`, `atoi s` | as sprig's |
//! | `BackOff n` | the kubelet's crash back-off after `n` restarts: 10 s doubling to 5 m (configurable) as Go prints it (`10s`, `5m0s`) |
//! | `TimeAfter d` | the time `d` (a Go duration) from now, RFC 3339 with milliseconds |
//! | `ContainerID name`, `ImageID image` | the fake ids kore's native lifecycle writes |
//!
//! The `*With` arguments are accepted and ignored: the kubelet already knows the pod's node.
//!
//! What differs from kwok's Go templates (gtmpl implements Go 1.10's `text/template`):
//! a field of a missing value is an error (Go yields no value; kore fills `metadata.labels`,
//! `metadata.annotations` and `status` with `{}` when absent, so the common cases hold);
//! variables cannot be re-assigned (`{{ $x = 1 }}`, Go 1.11); of sprig's ~100 functions only
//! the four above exist. An error makes the Stage write nothing (and is logged).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use gtmpl::{Context, Func, FuncError, Template, Value as Tv};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

/// Why a template did not render; the Stage writes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The template does not parse.
    #[error("parsing the template: {0}")]
    Parse(String),
    /// Executing it failed (a missing field, a function's error).
    #[error("executing the template: {0}")]
    Execute(String),
    /// Its output is not YAML.
    #[error("the template's output is not YAML: {0}")]
    Yaml(String),
}

/// What the functions know about the object being rendered.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The node's name.
    pub node_name: String,
    /// The node's InternalIP.
    pub node_ip: String,
    /// The pod's IP (empty for nodes).
    pub pod_ip: String,
    /// The pod's uid (for `ContainerID`).
    pub uid: String,
    /// The node's conditions as `NodeConditions` answers them.
    pub node_conditions: Value,
    /// The first crash back-off.
    pub backoff: Duration,
    /// The longest.
    pub max_backoff: Duration,
}

thread_local! {
    static FACTS: RefCell<Facts> = RefCell::new(Facts::default());
}

fn facts<T>(f: impl FnOnce(&Facts) -> T) -> T {
    FACTS.with(|c| f(&c.borrow()))
}

fn start_time() -> &'static str {
    static START: OnceLock<String> = OnceLock::new();
    START.get_or_init(|| Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// `Now`, to the second.
pub fn now_text() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// JSON → gtmpl.
pub fn to_template(v: &Value) -> Tv {
    match v {
        Value::Null => Tv::Nil,
        Value::Bool(b) => Tv::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Tv::from(i),
            (_, Some(u), _) => Tv::from(u),
            (_, _, Some(f)) => Tv::from(f),
            _ => Tv::Nil,
        },
        Value::String(s) => Tv::String(s.clone()),
        Value::Array(a) => Tv::Array(a.iter().map(to_template).collect()),
        Value::Object(o) => Tv::Map(
            o.iter()
                .map(|(k, v)| (k.clone(), to_template(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// gtmpl → JSON.
fn to_json(v: &Tv) -> Value {
    match v {
        Tv::NoValue | Tv::Nil | Tv::Function(_) => Value::Null,
        Tv::Bool(b) => json!(b),
        Tv::String(s) => json!(s),
        Tv::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => json!(i),
            (_, Some(u), _) => json!(u),
            (_, _, Some(f)) => json!(f),
            _ => Value::Null,
        },
        Tv::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Tv::Map(m) | Tv::Object(m) => {
            let sorted: std::collections::BTreeMap<_, _> =
                m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect();
            json!(sorted)
        }
    }
}

fn arg<'a>(args: &'a [Tv], i: usize, name: &str) -> Result<&'a Tv, FuncError> {
    args.get(i)
        .ok_or_else(|| FuncError::AtLeastXArgs(name.to_string(), i + 1))
}

fn quote(args: &[Tv]) -> Result<Tv, FuncError> {
    let v = to_json(arg(args, 0, "Quote")?);
    Ok(Tv::String(match v {
        Value::String(s) => json!(s).to_string(),
        Value::Null => "\"\"".to_string(),
        other => json!(other.to_string()).to_string(),
    }))
}

fn now(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::String(now_text()))
}

fn started(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::String(start_time().to_string()))
}

fn yaml(args: &[Tv]) -> Result<Tv, FuncError> {
    let v = to_json(arg(args, 0, "YAML")?);
    let text = serde_saphyr::to_string(&v).map_err(|e| FuncError::Generic(e.to_string()))?;
    let text = text.trim_end_matches('\n').to_string();
    let indent = match args.get(1) {
        Some(Tv::Number(n)) => n.as_u64().unwrap_or(0),
        _ => 0,
    };
    if indent == 0 {
        return Ok(Tv::String(text));
    }
    let pad = " ".repeat(usize::try_from(indent * 2).unwrap_or(0));
    Ok(Tv::String(
        format!("\n{text}").replace('\n', &format!("\n{pad}")),
    ))
}

fn version(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::String(env!("CARGO_PKG_VERSION").to_string()))
}

fn node_name(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::String(facts(|f| f.node_name.clone())))
}

fn node_ip(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::String(facts(|f| f.node_ip.clone())))
}

fn node_ips(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::Array(vec![Tv::String(facts(|f| f.node_ip.clone()))]))
}

fn node_port(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::from(10250i64))
}

fn pod_ip(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::String(facts(|f| f.pod_ip.clone())))
}

fn pod_ips(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::Array(vec![Tv::String(facts(|f| f.pod_ip.clone()))]))
}

fn node_conditions(_: &[Tv]) -> Result<Tv, FuncError> {
    Ok(to_template(&facts(|f| f.node_conditions.clone())))
}

fn dict(args: &[Tv]) -> Result<Tv, FuncError> {
    let mut m = HashMap::new();
    for pair in args.chunks(2) {
        let key = match &pair[0] {
            Tv::String(s) => s.clone(),
            other => other.to_string(),
        };
        m.insert(key, pair.get(1).cloned().unwrap_or(Tv::Nil));
    }
    Ok(Tv::Map(m))
}

fn int(v: &Tv) -> i64 {
    match v {
        Tv::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .unwrap_or(0),
        Tv::String(s) => s.trim().parse().unwrap_or(0),
        Tv::Bool(b) => i64::from(*b),
        _ => 0,
    }
}

fn add(args: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::from(args.iter().map(int).sum::<i64>()))
}

fn sub(args: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::from(
        int(arg(args, 0, "sub")?) - int(arg(args, 1, "sub")?),
    ))
}

fn atoi(args: &[Tv]) -> Result<Tv, FuncError> {
    Ok(Tv::from(int(arg(args, 0, "atoi")?)))
}

/// The kubelet's back-off after `restarts` restarts: `base` doubling, at most `max`.
pub fn backoff(restarts: i64, base: Duration, max: Duration) -> Duration {
    let shift = u32::try_from(restarts.clamp(0, 30)).unwrap_or(30);
    base.saturating_mul(1u32 << shift).min(max)
}

/// A duration as Go's `time.Duration.String` prints it (`10s`, `5m0s`, `1.5s`, `100ms`).
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let total = d.as_secs_f64();
    let h = (total / 3600.0).floor();
    let m = ((total - h * 3600.0) / 60.0).floor();
    let s = total - h * 3600.0 - m * 60.0;
    let secs = if (s - s.round()).abs() < 1e-9 {
        format!("{}s", s.round())
    } else {
        format!("{}s", (s * 1000.0).round() / 1000.0)
    };
    if h > 0.0 {
        format!("{h}h{m}m{secs}")
    } else if m > 0.0 {
        format!("{m}m{secs}")
    } else {
        secs
    }
}

fn back_off(args: &[Tv]) -> Result<Tv, FuncError> {
    let n = int(arg(args, 0, "BackOff")?);
    let (base, max) = facts(|f| (f.backoff, f.max_backoff));
    Ok(Tv::String(go_duration(backoff(n, base, max))))
}

fn time_after(args: &[Tv]) -> Result<Tv, FuncError> {
    let text = arg(args, 0, "TimeAfter")?.to_string();
    let d = super::engine::parse_go_duration(&text)
        .ok_or_else(|| FuncError::Generic(format!("TimeAfter: not a duration: {text}")))?;
    let at = Timestamp::now() + SignedDuration::try_from(d).unwrap_or(SignedDuration::ZERO);
    Ok(Tv::String(
        at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    ))
}

fn container_id(args: &[Tv]) -> Result<Tv, FuncError> {
    let name = arg(args, 0, "ContainerID")?.to_string();
    let uid = facts(|f| f.uid.clone());
    Ok(Tv::String(crate::kubelet::lifecycle::container_id_of(
        &uid, &name,
    )))
}

fn image_id(args: &[Tv]) -> Result<Tv, FuncError> {
    let image = arg(args, 0, "ImageID")?.to_string();
    Ok(Tv::String(crate::kubelet::lifecycle::image_id(&image)))
}

const FUNCS: &[(&str, Func)] = &[
    ("Quote", quote),
    ("Now", now),
    ("StartTime", started),
    ("YAML", yaml),
    ("Version", version),
    ("NodeName", node_name),
    ("NodeIP", node_ip),
    ("NodeIPWith", node_ip),
    ("NodeIPsWith", node_ips),
    ("NodePort", node_port),
    ("PodIP", pod_ip),
    ("PodIPWith", pod_ip),
    ("PodIPsWith", pod_ips),
    ("NodeConditions", node_conditions),
    ("dict", dict),
    ("add", add),
    ("sub", sub),
    ("atoi", atoi),
    ("BackOff", back_off),
    ("TimeAfter", time_after),
    ("ContainerID", container_id),
    ("ImageID", image_id),
];

/// Renders `text` on `object` to text.
pub fn render_text(text: &str, object: &Value, with: &Facts) -> Result<String, Error> {
    let mut data = object.clone();
    if let Some(o) = data.as_object_mut() {
        let meta = o.entry("metadata").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.entry("labels").or_insert_with(|| json!({}));
            m.entry("annotations").or_insert_with(|| json!({}));
        }
        let status = o.entry("status").or_insert_with(|| json!({}));
        if status.is_null() {
            *status = json!({});
        }
    }
    let mut template = Template::default();
    template.add_funcs(FUNCS);
    template
        .parse(text.trim())
        .map_err(|e| Error::Parse(e.to_string()))?;
    FACTS.with(|c| *c.borrow_mut() = with.clone());
    let out = template.render(&Context::from(to_template(&data)));
    FACTS.with(|c| *c.borrow_mut() = Facts::default());
    out.map_err(|e| Error::Execute(e.to_string()))
}

/// Renders `text` on `object` and reads the output as YAML; `None` when it is empty.
pub fn render(text: &str, object: &Value, with: &Facts) -> Result<Option<Value>, Error> {
    let out = render_text(text, object, with)?;
    if out.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_saphyr::from_str(&out).map_err(|e| Error::Yaml(format!("{e}: {out}")))?;
    Ok((!v.is_null()).then_some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kwok_style_templates_render_to_yaml() {
        let pod = json!({
            "metadata": {"name": "p", "annotations": {"x": "3"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}, {"name": "side", "image": "busybox"}]},
        });
        let text = r#"
{{ $now := Now }}
{{ $annotations := or .metadata.annotations dict }}
{{ $n := or ( index $annotations "x" ) 1 }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  restartCount: {{ sub (atoi $n) 1 }}
  state:
    waiting:
      reason: CrashLoopBackOff
      message: back-off {{ BackOff 1 }} restarting
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
phase: Running
"#;
        let facts = Facts {
            node_ip: "10.0.0.7".into(),
            backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(300),
            ..Facts::default()
        };
        let out = render(text, &pod, &facts).expect("renders").expect("some");
        assert_eq!(out["hostIP"], "10.0.0.7");
        assert_eq!(out["phase"], "Running");
        assert_eq!(out["containerStatuses"][1]["name"], "side");
        assert_eq!(out["containerStatuses"][0]["restartCount"], 2);
        assert_eq!(
            out["containerStatuses"][0]["state"]["waiting"]["message"],
            "back-off 20s restarting"
        );
    }

    #[test]
    fn back_off_doubles_to_five_minutes_and_prints_as_go() {
        let (b, m) = (Duration::from_secs(10), Duration::from_secs(300));
        let all: Vec<String> = (0..7).map(|n| go_duration(backoff(n, b, m))).collect();
        assert_eq!(all, ["10s", "20s", "40s", "1m20s", "2m40s", "5m0s", "5m0s"]);
        assert_eq!(go_duration(Duration::from_millis(100)), "100ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn quote_and_yaml_follow_kwok() {
        let out = render_text(
            r#"{{ Quote .a }} {{ Quote .n }}{{ YAML .m 1 }}"#,
            &json!({"a": "x\"y", "n": 3, "m": {"cpu": "4"}}),
            &Facts::default(),
        )
        .expect("renders");
        assert_eq!(out, "\"x\\\"y\" \"3\"\n  cpu: \"4\"");
    }
}
