//! The Grafana dashboard and the Prometheus alert rules under `deploy/` only
//! use metrics kcoord exports, and the list of exported names is the one the
//! source records: a renamed metric cannot leave a dashboard panel empty or
//! an alert silently never firing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "Test support code: a failed unwrap, expect or index is the test's verdict."
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kcoord::observability::metrics::{HISTOGRAMS, NAMES};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `kcoord_*` name in a PromQL expression (histogram series mapped to
/// their histogram).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("kcoord_") {
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|b| HISTOGRAMS.contains(b)))
            .unwrap_or(name);
        out.insert(base.to_string());
        rest = &tail[end..];
    }
    out
}

/// Every string value under a key named `expr` or `query`/`definition`
/// (panel targets and template variables), anywhere in the dashboard.
fn dashboard_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "query" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => dashboard_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

#[derive(serde::Deserialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(serde::Deserialize)]
struct RuleGroup {
    rules: Vec<Rule>,
}

#[derive(serde::Deserialize)]
struct Rule {
    alert: String,
    expr: String,
}

fn alert_rules() -> Vec<Rule> {
    let text = std::fs::read_to_string(root().join("deploy/prometheus/kcoord-alerts.yml")).expect("alert rules");
    let file: RuleFile = serde_yaml::from_str(&text).expect("the alert rules are valid YAML of Prometheus' shape");
    file.groups.into_iter().flat_map(|g| g.rules).collect()
}

fn assert_exported(what: &str, names: &BTreeSet<String>) {
    assert!(!names.is_empty(), "{what} uses no kcoord metric");
    let unknown: Vec<_> = names.iter().filter(|n| !NAMES.contains(&n.as_str())).collect();
    assert!(unknown.is_empty(), "{what} uses metrics kcoord does not export: {unknown:?}");
}

#[test]
fn the_grafana_dashboard_only_uses_exported_metrics() {
    let text = std::fs::read_to_string(root().join("deploy/grafana/kcoord-dashboard.json")).expect("dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is valid JSON");
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard, &mut exprs);
    let names: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    assert_exported("the Grafana dashboard", &names);
    for needed in ["kcoord_rebalances_total", "kcoord_consumer_lag", "kcoord_fsync_duration_seconds"] {
        assert!(names.contains(needed), "the dashboard shows {needed}");
    }
}

#[test]
fn the_alert_rules_cover_storms_lag_expiries_fsync_and_shards_with_exported_metrics() {
    let rules = alert_rules();
    let names: BTreeSet<String> = rules.iter().flat_map(|r| metric_names(&r.expr)).collect();
    assert_exported("the alert rules", &names);
    let alerts: Vec<&str> = rules.iter().map(|r| r.alert.as_str()).collect();
    for (alert, metric) in [
        ("KcoordRebalanceStorm", "kcoord_rebalances_total"),
        ("KcoordConsumerLagGrowing", "kcoord_consumer_lag"),
        ("KcoordSessionExpiryBurst", "kcoord_session_expirations_total"),
        ("KcoordFsyncSlow", "kcoord_fsync_duration_seconds"),
        ("KcoordShardFailed", "kcoord_shard_failures_total"),
    ] {
        let rule = rules.iter().find(|r| r.alert == alert).unwrap_or_else(|| panic!("{alert} missing from {alerts:?}"));
        assert!(metric_names(&rule.expr).contains(metric), "{alert} watches {metric}: {}", rule.expr);
    }
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_exported_metric_list_is_exactly_what_the_source_records() {
    let registry = root().join("src/observability/metrics.rs");
    let mut files = Vec::new();
    source_files(&root().join("src"), &mut files);
    let mut used = BTreeSet::new();
    for f in files.iter().filter(|f| **f != registry) {
        let text = std::fs::read_to_string(f).expect("source file");
        for quoted in text.split('"').skip(1).step_by(2) {
            if quoted.starts_with("kcoord_") {
                used.extend(metric_names(quoted));
            }
        }
    }
    let listed: BTreeSet<String> = NAMES.iter().map(|s| s.to_string()).collect();
    assert_eq!(used, listed, "observability::metrics::NAMES must list every metric the source records");
    assert!(HISTOGRAMS.iter().all(|h| NAMES.contains(h)));
}

#[test]
fn metric_names_are_read_out_of_promql() {
    let names = metric_names(
        "histogram_quantile(0.99, sum by (le) (rate(kcoord_fsync_duration_seconds_bucket[5m]))) > 0 \
         and kcoord_groups{state=\"Stable\"} + kcoord_connections_total",
    );
    let expected: BTreeSet<String> =
        ["kcoord_fsync_duration_seconds", "kcoord_groups", "kcoord_connections_total"].map(String::from).into();
    assert_eq!(names, expected);
}
