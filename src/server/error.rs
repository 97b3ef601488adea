//! The API's one error shape: `{ "error": { "code", "message", "field"? } }`
//! with the status code that fits.

use crate::engine::command::Refusal;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ErrorBody {
    /// Stable, machine-readable: `unauthorized`, `forbidden`, `not-found`…
    pub code: &'static str,
    /// For people: what was wrong and what to do.
    pub message: String,
    /// The request field at fault, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Every problem of a spec that did not validate, with line and column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problems: Option<Vec<crate::spec::load::Diagnostic>>,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, body: ErrorBody { code, message: message.into(), field: None, problems: None } }
    }
    pub fn field(mut self, field: &str) -> Self {
        self.body.field = Some(field.to_string());
        self
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// A journal read that failed: 503 while the journal's database is out
    /// of reach (a PostgreSQL restart: clients retry a read on 503), else
    /// 500.
    pub fn journal(e: crate::journal::JournalError) -> Self {
        if e.unreachable() {
            Self::unavailable(format!("the journal's database is out of reach; retry in a moment ({e})"))
        } else {
            Self::internal(e.to_string())
        }
    }

    /// The engine's refusal of a command.
    pub fn refused(code: Refusal, message: String) -> Self {
        match code {
            Refusal::Invalid => Self::unprocessable(message),
            Refusal::NotFound => Self::not_found(message),
            Refusal::Conflict => Self::conflict(message),
            Refusal::Unavailable => Self::unavailable(message),
            Refusal::Unschedulable => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "unschedulable", message).field("resources")
            }
        }
    }
}

/// The body of every error answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ErrorAnswer {
    pub error: ErrorBody,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorAnswer { error: self.body })).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// `axum`'s `Query`, refusing a query string that does not parse with the
/// API's error shape (400, `bad-request`, naming the parameter) instead of
/// axum's plain text.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for Query<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(q.as_bytes()));
        serde_path_to_error::deserialize(de).map(Query).map_err(|e| {
            let field = e.path().to_string();
            let mut err = ApiError::bad_request(format!(
                "the query parameter {field} is not valid: {}; GET /v1/openapi.json says what each takes",
                e.inner()
            ));
            if field != "." {
                err = err.field(&field);
            }
            err
        })
    }
}

/// Whether a request carries a body (a length above zero, or chunks).
pub fn has_body(headers: &axum::http::HeaderMap) -> bool {
    use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    headers.contains_key(TRANSFER_ENCODING)
        || headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() != "0")
}

/// A refusal answered before the request's body was read: the connection
/// cannot carry another request (the unread body is still on it, and the
/// server closes it after answering), so the answer says so. Without the
/// header a client that keeps connections alive sends its next request on
/// this one and finds it closed under it ("server disconnected without
/// sending a response").
pub fn closing(mut r: Response) -> Response {
    r.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    r
}
