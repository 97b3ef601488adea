//! `/v1/tokens`: who may call the API. Admins make, list and revoke
//! tokens; a token's secret is in the answer that made it, and nowhere
//! else. With tenants, a non-admin token belongs to one.

use super::Served;
use super::auth::{self, Principal, Role, Scope};
use super::authz;
use super::error::{ApiError, ApiResult};
use super::target::Target;
use crate::engine::model::{Millis, Record};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

/// One API token as `GET /v1/tokens` lists it: who may call, never the
/// secret nor its hash: the answer's own type, not the stored row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenView {
    /// The public part of the token, which finds its row.
    pub id: String,
    pub name: String,
    /// `viewer`, `submitter`, `operator` or `admin`.
    pub role: String,
    /// `provider=NAME` or `pool=PROVIDER/POOL`; empty for no limit.
    #[serde(default)]
    pub scopes: Vec<String>,
    pub created_at: Millis,
    pub created_by: String,
    #[serde(default)]
    pub expires_at: Option<Millis>,
    #[serde(default)]
    pub revoked_at: Option<Millis>,
    /// The tenant it belongs to (`None`: made before tenants, or an admin's).
    #[serde(default)]
    pub tenant: Option<String>,
}

impl From<crate::journal::TokenRow> for TokenView {
    fn from(r: crate::journal::TokenRow) -> Self {
        TokenView {
            id: r.id,
            name: r.name,
            role: r.role,
            scopes: r.scopes,
            created_at: r.created_at,
            created_by: r.created_by,
            expires_at: r.expires_at,
            revoked_at: r.revoked_at,
            tenant: r.tenant,
        }
    }
}

pub(super) async fn tokens(State(s): State<Served>) -> Json<Vec<TokenView>> {
    Json(s.tokens.list().into_iter().map(TokenView::from).collect())
}

/// `POST /v1/tokens`.
#[derive(Debug, Deserialize, Serialize, schemars::JsonSchema)]
pub struct NewTokenRequest {
    pub name: String,
    pub role: Role,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Milliseconds since the epoch.
    pub expires_at: Option<i64>,
    /// The tenant it belongs to: required for non-admin tokens when
    /// tenants are configured.
    #[serde(default)]
    pub tenant: Option<String>,
}

/// The answer to `POST /v1/tokens`: the only time the secret is shown.
#[derive(Debug, Deserialize, Serialize, schemars::JsonSchema)]
pub struct NewTokenResponse {
    pub name: String,
    pub role: Role,
    pub scopes: Vec<String>,
    pub expires_at: Option<i64>,
    #[serde(default)]
    pub tenant: Option<String>,
    pub token: String,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with("local:")
}

pub(super) async fn create_token(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    req: Request,
) -> ApiResult<Response> {
    let body = super::api::body_bytes(req).await?;
    let r: NewTokenRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::unprocessable(format!("{e} (line {}, column {})", e.line(), e.column())))?;
    if !valid_name(&r.name) {
        return Err(ApiError::unprocessable("a token's name is 1 to 64 letters, digits, '-', '_' or '.'")
            .field("name"));
    }
    let scopes: Vec<Scope> = r
        .scopes
        .iter()
        .map(|x| x.parse::<Scope>())
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::unprocessable(e).field("scopes"))?;
    if !scopes.is_empty() && r.role != Role::Operator {
        return Err(ApiError::unprocessable("scopes limit operators; give --role operator with --scope")
            .field("scopes"));
    }
    let now = authz::now();
    if r.expires_at.is_some_and(|t| t <= now.0) {
        return Err(ApiError::unprocessable("the token would expire before it is made").field("expires_at"));
    }
    if s.tokens.has_live(&r.name) {
        return Err(ApiError::conflict(format!(
            "a token named {:?} exists; revoke it first or pick another name",
            r.name
        )));
    }
    let tenancy = s.tenancy();
    match &r.tenant {
        Some(t) if tenancy.is_empty() => {
            return Err(ApiError::unprocessable(format!(
                "tenant {t:?} is given but no tenants are configured; leave it out, or define [[tenant]] first"
            ))
            .field("tenant"));
        }
        Some(t) if tenancy.tenant(t).is_none() => {
            let known: Vec<&str> = tenancy.tenants.iter().map(|t| t.name.as_str()).collect();
            return Err(ApiError::unprocessable(format!(
                "no tenant {t:?}; the tenants are {}",
                known.join(", ")
            ))
            .field("tenant"));
        }
        None if !tenancy.is_empty() && r.role != Role::Admin => {
            let known: Vec<&str> = tenancy.tenants.iter().map(|t| t.name.as_str()).collect();
            return Err(ApiError::unprocessable(format!(
                "tenants are configured, so a {} token must belong to one; give --tenant (one of {})",
                r.role,
                known.join(", ")
            ))
            .field("tenant"));
        }
        _ => {}
    }
    let minted =
        auth::mint(&r.name, r.role, &scopes, r.expires_at.map(Millis), &p.name, r.tenant.as_deref(), now)
            .map_err(ApiError::internal)?;
    let audit = auth::audit(
        &p,
        "token-create",
        Some(r.name.clone()),
        match &r.tenant {
            Some(t) => format!("ok: role {}, tenant {t}", r.role),
            None => format!("ok: role {}", r.role),
        },
        now,
    );
    let row = minted.row.clone();
    let records = vec![Record::Audit(Box::new(audit.clone()))];
    s.engine()?
        .commit(records, move |j, _| Ok((j.insert_token(&row, &audit)?, ())))
        .await
        .map_err(ApiError::internal)?;
    s.tokens.insert(minted.row);
    let resp = NewTokenResponse {
        name: r.name,
        role: r.role,
        scopes: r.scopes,
        expires_at: r.expires_at,
        tenant: r.tenant,
        token: minted.secret,
    };
    Ok((StatusCode::CREATED, Json(resp)).into_response())
}

pub(super) async fn revoke_token(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Extension(t): Extension<Target>,
) -> ApiResult<Json<super::views::CommandAnswer>> {
    let name = t.token()?.to_string();
    let now = authz::now();
    let known = s.tokens.has_live(&name);
    let outcome = if known { "ok".to_string() } else { "refused: no such live token".to_string() };
    let audit = auth::audit(&p, "token-revoke", Some(name.clone()), outcome, now);
    let n = name.clone();
    let revoked = s
        .engine()?
        .commit(vec![Record::Audit(Box::new(audit.clone()))], move |j, _| {
            let (revoked, seq) = j.revoke_token(&n, now, &audit)?;
            Ok((seq, revoked))
        })
        .await
        .map_err(ApiError::internal)?;
    s.tokens.revoke(&name, now);
    if !revoked {
        return Err(ApiError::not_found(format!("no live token named {name:?}")));
    }
    Ok(Json(super::views::CommandAnswer {
        message: format!("token {name} revoked"),
        id: None,
        existing: None,
    }))
}
