//! Who is calling: principals, roles, scopes and bearer tokens.
//!
//! A token looks like `canopy_<id>_<secret>`: `id` finds its row, and only
//! `sha256(salt || secret)` is stored. The secret is shown once, when the
//! token is made. The store's owner, on the owner-only socket, needs no
//! token: whoever can open the socket can open the store itself.

use crate::engine::model::{AuditRecord, Millis};
use crate::journal::TokenRow;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;

/// What a principal may do; each role includes the ones before it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads everything.
    Viewer,
    /// Also submits, and cancels or retries what it submitted.
    Submitter,
    /// Also cordons, drains, lifts quarantines and cancels anyone's work
    /// (within its scopes).
    Operator,
    /// Also manages tokens.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Submitter => "submitter",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "submitter" => Ok(Role::Submitter),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            _ => Err(format!("unknown role {s:?}; one of viewer, submitter, operator, admin")),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A limit on where an operator may act.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every pool of one provider.
    Provider(String),
    /// One pool, as `provider/pool`.
    Pool(String),
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('=') {
            Some(("provider", v)) if !v.is_empty() && !v.contains('/') => Ok(Scope::Provider(v.into())),
            Some(("pool", v)) if v.split_once('/').is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()) => {
                Ok(Scope::Pool(v.into()))
            }
            _ => Err(format!("{s:?} is not a scope; write provider=NAME or pool=PROVIDER/POOL")),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Provider(p) => write!(f, "provider={p}"),
            Scope::Pool(p) => write!(f, "pool={p}"),
        }
    }
}

impl Scope {
    /// Whether this scope covers pool `provider/pool`.
    pub fn covers(&self, provider: &str, pool_label: &str) -> bool {
        match self {
            Scope::Provider(p) => p == provider,
            Scope::Pool(p) => p == pool_label,
        }
    }
}

/// Who is calling, as every handler and the audit trail see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// A token's name, or `local:USER` for the store's owner.
    pub name: String,
    pub role: Role,
    /// Empty: no limit.
    pub scopes: Vec<Scope>,
    /// `socket (uid 1000)` or the client's address.
    pub origin: String,
    /// The token it came with; `None` for the store's owner on the socket.
    pub token_id: Option<String>,
    /// The tenant it acts for; `None` when no tenants are configured (see
    /// [`Principal::with_tenant`]).
    pub tenant: Option<String>,
}

impl Principal {
    /// The principal with its tenant settled under `tenancy`, or why it
    /// may not act at all. `token_tenant`: the tenant its token was made
    /// for (`None` for the socket owner and tokens from before tenants).
    ///
    /// Without tenants nobody has one. With them: the socket owner's is
    /// `default_tenant`; a token's is the one it was made for, which must
    /// still exist; a token made without one belongs to `default_tenant`
    /// when set, and is refused otherwise (admins act across tenants and
    /// are never refused for it).
    pub fn with_tenant(
        mut self,
        token_tenant: Option<&str>,
        tenancy: &crate::tenant::Tenancy,
    ) -> Result<Principal, String> {
        if tenancy.is_empty() {
            self.tenant = None;
            return Ok(self);
        }
        let default = tenancy.default_tenant.clone();
        self.tenant = match token_tenant {
            Some(t) if tenancy.tenant(t).is_some() => Some(t.to_string()),
            Some(_) if self.role == Role::Admin => default,
            Some(t) => {
                return Err(format!(
                    "the token {:?} belongs to tenant {t:?}, which is no longer configured; \
                     ask an admin for a token of an existing tenant (canopy tenants lists them)",
                    self.name
                ));
            }
            None if self.token_id.is_none() || self.role == Role::Admin || default.is_some() => default,
            None => {
                return Err(format!(
                    "the token {:?} was made before tenants were configured and belongs to none, and no \
                     default_tenant is set; ask an admin to recreate it with \
                     `canopy token create {} --role {} --tenant TENANT`",
                    self.name, self.name, self.role
                ));
            }
        };
        Ok(self)
    }

    /// Whether the principal's scopes allow acting on pool `provider/pool`.
    pub fn in_scope(&self, provider: &str, pool_label: &str) -> bool {
        self.scopes.is_empty() || self.scopes.iter().any(|s| s.covers(provider, pool_label))
    }
}

/// A new token: what is shown once, and the row that is stored.
pub struct NewToken {
    pub secret: String,
    pub row: TokenRow,
}

/// Makes a token. The secret never leaves this value except to be shown
/// to whoever asked for it.
pub fn mint(
    name: &str,
    role: Role,
    scopes: &[Scope],
    expires_at: Option<Millis>,
    created_by: &str,
    tenant: Option<&str>,
    now: Millis,
) -> Result<NewToken, String> {
    let id = hex::encode(random_bytes::<6>()?);
    let secret = hex::encode(random_bytes::<24>()?);
    let salt = hex::encode(random_bytes::<16>()?);
    let hash = digest(&salt, &secret);
    Ok(NewToken {
        secret: format!("canopy_{id}_{secret}"),
        row: TokenRow {
            id,
            name: name.to_string(),
            role: role.as_str().to_string(),
            scopes: scopes.iter().map(Scope::to_string).collect(),
            salt,
            hash,
            created_at: now,
            created_by: created_by.to_string(),
            expires_at,
            revoked_at: None,
            tenant: tenant.map(str::to_string),
        },
    })
}

fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness from the OS: {e}"))?;
    Ok(b)
}

fn digest(salt: &str, secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt.as_bytes());
    h.update(secret.as_bytes());
    hex::encode(h.finalize())
}

/// Compares in time independent of where the first difference is.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a bearer token was not accepted; the message never repeats it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no bearer token; send `Authorization: Bearer TOKEN` (canopy token create makes one)")]
    Missing,
    #[error("the bearer token is not valid; check it, or ask an admin for a new one")]
    Invalid,
    #[error("the bearer token {name:?} has expired; ask an admin for a new one")]
    Expired { name: String },
    #[error("the bearer token {name:?} was revoked; ask an admin for a new one")]
    Revoked { name: String },
    /// A valid token with no tenant to act for (see [`Principal::with_tenant`]).
    #[error("{message}")]
    NoTenant { message: String },
}

/// The tokens the server knows, by id: loaded from the store at start,
/// kept in step as tokens are made and revoked through the server.
#[derive(Debug, Default)]
pub struct Tokens {
    by_id: RwLock<HashMap<String, TokenRow>>,
}

impl Tokens {
    pub fn new(rows: Vec<TokenRow>) -> Tokens {
        Tokens { by_id: RwLock::new(rows.into_iter().map(|r| (r.id.clone(), r)).collect()) }
    }

    /// Replaces every token with `rows` (read again from the journal).
    pub fn replace(&self, rows: Vec<TokenRow>) {
        *self.by_id.write().unwrap_or_else(|e| e.into_inner()) =
            rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    }

    /// Whether a token with this id is known, live or not.
    pub fn knows(&self, id: &str) -> bool {
        self.by_id.read().unwrap_or_else(|e| e.into_inner()).contains_key(id)
    }

    pub fn insert(&self, row: TokenRow) {
        self.by_id.write().unwrap_or_else(|e| e.into_inner()).insert(row.id.clone(), row);
    }

    /// Marks the live token `name` revoked; false when there is none.
    pub fn revoke(&self, name: &str, now: Millis) -> bool {
        let mut map = self.by_id.write().unwrap_or_else(|e| e.into_inner());
        let mut done = false;
        for r in map.values_mut().filter(|r| r.name == name && r.revoked_at.is_none()) {
            r.revoked_at = Some(now);
            done = true;
        }
        done
    }

    /// Whether a live token has this name.
    pub fn has_live(&self, name: &str) -> bool {
        self.by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|r| r.name == name && r.revoked_at.is_none())
    }

    /// The name of the token with this id, live or not.
    pub fn name_of(&self, id: &str) -> Option<String> {
        self.by_id.read().unwrap_or_else(|e| e.into_inner()).get(id).map(|r| r.name.clone())
    }

    /// Why the token with this id no longer stands for its principal at
    /// `now` (revoked, expired, unknown); `None` while it does. Open
    /// streams ask this.
    pub fn no_longer_valid(&self, id: &str, now: Millis) -> Option<String> {
        let map = self.by_id.read().unwrap_or_else(|e| e.into_inner());
        let error = match map.get(id) {
            None => TokenError::Invalid,
            Some(r) if r.revoked_at.is_some() => TokenError::Revoked { name: r.name.clone() },
            Some(r) if r.expires_at.is_some_and(|t| now >= t) => TokenError::Expired { name: r.name.clone() },
            Some(_) => return None,
        };
        Some(error.to_string())
    }

    /// Every token, oldest first.
    pub fn list(&self) -> Vec<TokenRow> {
        let mut v: Vec<TokenRow> =
            self.by_id.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        v.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        v
    }

    /// The principal a bearer token stands for, at `now`.
    pub fn verify(&self, bearer: &str, origin: &str, now: Millis) -> Result<Principal, TokenError> {
        let rest = bearer.strip_prefix("canopy_").ok_or(TokenError::Invalid)?;
        let (id, secret) = rest.split_once('_').ok_or(TokenError::Invalid)?;
        let map = self.by_id.read().unwrap_or_else(|e| e.into_inner());
        let row = map.get(id).ok_or(TokenError::Invalid)?;
        if !same(&digest(&row.salt, secret), &row.hash) {
            return Err(TokenError::Invalid);
        }
        if row.revoked_at.is_some() {
            return Err(TokenError::Revoked { name: row.name.clone() });
        }
        if row.expires_at.is_some_and(|t| now >= t) {
            return Err(TokenError::Expired { name: row.name.clone() });
        }
        let role = row.role.parse().map_err(|_| TokenError::Invalid)?;
        let scopes = row.scopes.iter().filter_map(|s| s.parse().ok()).collect();
        Ok(Principal {
            name: row.name.clone(),
            role,
            scopes,
            origin: origin.to_string(),
            token_id: Some(row.id.clone()),
            tenant: row.tenant.clone(),
        })
    }
}

/// An audit record of `action` on `target` by `p`.
pub fn audit(
    p: &Principal,
    action: &str,
    target: Option<String>,
    outcome: String,
    now: Millis,
) -> AuditRecord {
    AuditRecord {
        at: now,
        principal: p.name.clone(),
        origin: p.origin.clone(),
        action: action.to_string(),
        target,
        outcome,
        reason: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_verifies_and_nothing_else_does() {
        let t = mint("ci", Role::Submitter, &[], None, "local:root", None, Millis(0)).unwrap();
        assert!(!t.row.hash.contains(&t.secret[20..]), "only a hash is kept");
        let tokens = Tokens::new(vec![t.row.clone()]);
        let p = tokens.verify(&t.secret, "127.0.0.1:1", Millis(1)).unwrap();
        assert_eq!((p.name.as_str(), p.role), ("ci", Role::Submitter));
        let mut wrong = t.secret.clone();
        wrong.pop();
        wrong.push('x');
        assert_eq!(tokens.verify(&wrong, "", Millis(1)), Err(TokenError::Invalid));
        assert_eq!(tokens.verify("Bearer nonsense", "", Millis(1)), Err(TokenError::Invalid));
        assert!(tokens.revoke("ci", Millis(2)));
        assert_eq!(tokens.verify(&t.secret, "", Millis(3)), Err(TokenError::Revoked { name: "ci".into() }));
    }

    #[test]
    fn scopes_parse_and_cover_what_they_name() {
        let p: Scope = "provider=onprem-fra".parse().unwrap();
        assert!(p.covers("onprem-fra", "onprem-fra/a100-40"));
        assert!(!p.covers("cloud-a", "cloud-a/x"));
        let q: Scope = "pool=cloud-a/a10g-ondemand".parse().unwrap();
        assert!(q.covers("cloud-a", "cloud-a/a10g-ondemand"));
        assert!(!q.covers("cloud-a", "cloud-a/other"));
        assert!("region=eu".parse::<Scope>().is_err());
        assert!("pool=nope".parse::<Scope>().is_err());
    }
}
