//! HTTP request metrics: `canopy_http_requests_total{route,method,status}`
//! and `canopy_http_request_duration_seconds{route}`, counted by a
//! middleware around every route. The `route` label is the route template
//! as the API's table names it (`/v1/workloads/{id}`), never the path a
//! client sent, so the label sets stay as few as the routes: requests no
//! route matches count under `unmatched`, unknown methods under `OTHER`.
//!
//! The duration runs until the response's head is ready: a stream (the
//! event stream, a followed log) counts the time to its first byte.

use super::prom::{self, family};
use super::{Served, authz};
use crate::engine::metrics::Histogram;
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

/// The `route` label of requests no route matched.
pub const UNMATCHED: &str = "unmatched";

const BOUNDS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The counts, shared by the middleware (writes) and `/metrics` (reads).
#[derive(Debug, Default)]
pub struct HttpMetrics {
    /// `(route, method, status)` → requests.
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), u64>>,
    durations: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl HttpMetrics {
    fn observe(&self, route: &'static str, method: &'static str, status: u16, took: std::time::Duration) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((route, method, status))
            .or_default() += 1;
        self.durations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(route)
            .or_insert_with(|| Histogram::new(BOUNDS))
            .observe(took);
    }

    /// Appends both families.
    pub fn render(&self, out: &mut String) {
        let name = "canopy_http_requests_total";
        family(out, name, "counter", "HTTP requests answered, by route template, method and status.");
        for ((route, method, status), n) in self.requests.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "{name}{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {n}");
        }
        let name = "canopy_http_request_duration_seconds";
        let help = "Time to answer an HTTP request (to the response head), by route template.";
        family(out, name, "histogram", help);
        for (route, h) in self.durations.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            prom::histogram_series(out, name, &format!("route=\"{route}\""), h.snapshot());
        }
    }
}

/// The middleware: times the request and counts its answer under the
/// route template as the API's table names it (`'static`, so bounded),
/// a command's `{op}` resolved to its own line (`/v1/workloads/{id}/cancel`).
pub async fn record(
    State(s): State<Served>,
    matched: Option<MatchedPath>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = method_label(req.method());
    let op = params.ok().and_then(|p| p.iter().find(|(k, _)| *k == "op").map(|(_, v)| v.to_string()));
    let route = match &matched {
        Some(m) => authz::route(req.method(), m.as_str(), op.as_deref()).map_or(UNMATCHED, |r| r.path),
        None => UNMATCHED,
    };
    let response = next.run(req).await;
    s.http.observe(route, method, response.status().as_u16(), started.elapsed());
    response
}

fn method_label(m: &Method) -> &'static str {
    const KNOWN: [Method; 7] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ];
    KNOWN.iter().find(|k| *k == m).map_or("OTHER", Method::as_str)
}
