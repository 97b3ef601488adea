//! Where the MCP server's tools send their requests: the API itself, with
//! the caller's own credentials, so every tool call is authenticated,
//! authorized and audited exactly as the HTTP call it maps onto.
//!
//! - [`Upstream::Remote`]: `canopy mcp` (stdio), a client of a running
//!   server over its socket or TCP, with the token the CLI would use.
//! - [`Upstream::InProcess`]: `/mcp` on `canopy serve`, the API's own
//!   router called in this process with the MCP request's connection
//!   (`ConnectInfo<Peer>`) and `Authorization` header: the same middleware,
//!   handlers and audit as a request on the wire; the token goes nowhere
//!   else.

use crate::client::{Client, ClientError};
use crate::server::listen::Peer;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Method, Request, header};

/// The most bytes of one answer a tool reads (a log read asks for far
/// less; an artifact is read only when small).
pub const MAX_ANSWER: usize = 8 << 20;

/// An answer of the API, whatever its status.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// `x-canopy-next-offset` of a log read.
    pub next_offset: Option<u64>,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// What an error answer says: its `error.message`, else the status.
    pub fn message(&self) -> String {
        let v = self.json();
        match v["error"]["message"].as_str() {
            Some(m) => format!("{} ({})", m, self.status),
            None => format!("the API answered {}", self.status),
        }
    }
}

/// How a tool reaches the API.
#[derive(Clone)]
pub enum Upstream {
    Remote(Box<Client>),
    InProcess { router: axum::Router, peer: Peer, authorization: Option<HeaderValue> },
}

/// A request to the API: method, path with query, extra headers, body.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: Method,
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Call {
    pub fn get(path: impl Into<String>) -> Call {
        Call { method: Method::GET, path: path.into(), headers: Vec::new(), body: Vec::new() }
    }

    pub fn post(path: impl Into<String>, content_type: &str, body: Vec<u8>) -> Call {
        Call {
            method: Method::POST,
            path: path.into(),
            headers: vec![("content-type", content_type.to_string())],
            body,
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Call {
        self.headers.push((name, value.into()));
        self
    }
}

impl Upstream {
    /// Sends `call`; an error only when no answer came back.
    pub async fn send(&self, call: Call) -> Result<Answer, String> {
        match self {
            Upstream::Remote(client) => {
                let (status, headers, body) = client
                    .raw(call.method, &call.path, &call.headers, call.body, MAX_ANSWER)
                    .await
                    .map_err(|e: ClientError| e.to_string())?;
                Ok(Answer {
                    status,
                    next_offset: next_offset(headers.get(crate::server::api::NEXT_OFFSET)),
                    content_type: content_type(headers.get(header::CONTENT_TYPE)),
                    body,
                })
            }
            Upstream::InProcess { router, peer, authorization } => {
                use tower::ServiceExt;
                let mut b = Request::builder().method(call.method).uri(&call.path);
                for (k, v) in &call.headers {
                    b = b.header(*k, v);
                }
                if let Some(a) = authorization {
                    b = b.header(header::AUTHORIZATION, a.clone());
                }
                let mut req =
                    b.body(Body::from(call.body)).map_err(|e| format!("building {}: {e}", call.path))?;
                req.extensions_mut().insert(ConnectInfo(peer.clone()));
                let resp = match router.clone().oneshot(req).await {
                    Ok(r) => r,
                    Err(never) => match never {},
                };
                let status = resp.status().as_u16();
                let next = next_offset(resp.headers().get(crate::server::api::NEXT_OFFSET));
                let ct = content_type(resp.headers().get(header::CONTENT_TYPE));
                let body = axum::body::to_bytes(resp.into_body(), MAX_ANSWER)
                    .await
                    .map_err(|e| format!("reading the answer to {}: {e}", call.path))?;
                Ok(Answer { status, next_offset: next, content_type: ct, body: body.to_vec() })
            }
        }
    }
}

fn next_offset(v: Option<&HeaderValue>) -> Option<u64> {
    v.and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

fn content_type(v: Option<&HeaderValue>) -> String {
    v.and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}
